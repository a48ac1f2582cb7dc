package engine

import (
	"errors"
	"slices"
	"testing"
)

// testParams has round numbers so that known answers are exact: 1000
// prompt tokens take 100 ms, a decode step at batch b takes 20 + 0.5*b ms,
// the cache holds 10 blocks of 100 tokens.
func testParams() Params {
	return Params{PrefillTokensPerS: 10_000, DecodeBaseMs: 20, DecodePerSeqMs: 0.5,
		MaxBatch: 8, KVCacheTokens: 1000, BlockTokens: 100}
}

func ms(x float64) int64 { return int64(x * 1e6) }

func newTest(t *testing.T, p Params) *Engine {
	t.Helper()
	e, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func submit(t *testing.T, e *Engine, at int64, id uint64, prompt, output int, blocks ...uint64) {
	t.Helper()
	if err := e.Submit(at, Request{ID: id, Tag: 100 + id, PromptTokens: prompt, OutputTokens: output, Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
}

// drain runs the engine the way an event loop would, one event at a time.
func drain(e *Engine) []Done {
	var out []Done
	for {
		at, ok := e.NextEventTime()
		if !ok {
			return out
		}
		out = e.Advance(at, out)
	}
}

func byID(t *testing.T, ds []Done, id uint64) Done {
	t.Helper()
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("no completion for request %d in %+v", id, ds)
	return Done{}
}

func TestSingleRequestKnownAnswer(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, 0, 1, 2000, 11)
	ds := drain(e)
	want := Done{ID: 1, Tag: 101, ArrivalNs: 0, FirstTokenNs: ms(200), FinishNs: ms(200 + 10*20.5),
		TTFTMs: 200, TBOTMs: 20.5, PromptTokens: 2000, OutputTokens: 11}
	if len(ds) != 1 || ds[0] != want {
		t.Fatalf("got %+v\nwant %+v", ds, want)
	}
	st := e.Stats()
	wantSt := Stats{Submitted: 1, Served: 1, PromptTokens: 2000, OutputTokens: 11, Prefills: 1,
		DecodeSteps: 10, PrefillNs: ms(200), DecodeNs: ms(205)}
	if st != wantSt || st.BusyNs() != ms(405) {
		t.Fatalf("stats %+v, want %+v", st, wantSt)
	}
}

func TestOneTokenFinishesAtPrefillEnd(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, ms(5), 1, 500, 1)
	d := drain(e)[0]
	if d.FirstTokenNs != ms(55) || d.FinishNs != ms(55) || d.TTFTMs != 50 || d.TBOTMs != 0 {
		t.Fatalf("got %+v, want first = finish = 55 ms, TBOT 0", d)
	}
}

func TestBatchSharesDecodeSteps(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, 0, 1, 1000, 3)
	submit(t, e, 0, 2, 1000, 5)
	ds := drain(e)
	// One prefill of 2000 tokens (200 ms); two steps at b=2 (21 ms), then
	// request 2 alone for two steps at b=1 (20.5 ms).
	a, b := byID(t, ds, 1), byID(t, ds, 2)
	if a.FirstTokenNs != ms(200) || b.FirstTokenNs != ms(200) {
		t.Fatalf("first tokens %d, %d; want both at 200 ms", a.FirstTokenNs, b.FirstTokenNs)
	}
	if a.FinishNs != ms(242) || b.FinishNs != ms(283) {
		t.Fatalf("finishes %d, %d; want 242 and 283 ms", a.FinishNs, b.FinishNs)
	}
	if ds[0].ID != 1 {
		t.Fatalf("completions out of finish order: %+v", ds)
	}
}

func TestArrivalWaitsForStepEndAndStallsDecode(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, 0, 1, 1000, 11)      // prefill 0-100, steps of 20.5 ms
	submit(t, e, ms(110), 2, 1000, 2) // arrives inside the step 100-120.5
	ds := drain(e)
	a, b := byID(t, ds, 1), byID(t, ds, 2)
	// B is prefilled 120.5-220.5 while A waits; one step at b=2 (21 ms)
	// finishes B; A's last 8 steps run alone.
	if b.FirstTokenNs != ms(220.5) || b.TTFTMs != 110.5 || b.FinishNs != ms(241.5) {
		t.Fatalf("request 2 %+v; want first 220.5 ms, TTFT 110.5 ms, finish 241.5 ms", b)
	}
	if a.FinishNs != ms(241.5+8*20.5) {
		t.Fatalf("request 1 finishes at %d, want %d", a.FinishNs, ms(241.5+8*20.5))
	}
}

// TestArrivalAtBoundary pins the tie rule: an arrival at the time an
// iteration ends joins the decision taken then, unless the caller has
// already advanced to that time.
func TestArrivalAtBoundary(t *testing.T) {
	for _, tc := range []struct {
		advanceFirst bool
		wantFirst    int64
	}{
		{false, ms(120.5 + 100)}, // admitted at the step boundary 120.5
		{true, ms(141 + 100)},    // the decision at 120.5 was taken; next boundary is A's finish
	} {
		e := newTest(t, testParams())
		submit(t, e, 0, 1, 1000, 3)
		var ds []Done
		if tc.advanceFirst {
			ds = e.Advance(ms(120.5), ds)
		}
		submit(t, e, ms(120.5), 2, 1000, 1)
		ds = append(ds, drain(e)...)
		if got := byID(t, ds, 2).FirstTokenNs; got != tc.wantFirst {
			t.Errorf("advance first %v: first token at %d, want %d", tc.advanceFirst, got, tc.wantFirst)
		}
	}
}

func TestPrefixCacheShortensTTFT(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, 0, 1, 350, 1, 1, 2, 3)
	submit(t, e, ms(100), 2, 450, 1, 1, 2, 3, 4) // 300 tokens cached
	submit(t, e, ms(200), 3, 450, 1, 9, 2, 3, 4) // first block differs: no hit
	submit(t, e, ms(300), 4, 250, 1, 1, 2, 3, 4) // hit capped at the prompt
	ds := drain(e)
	for _, c := range []struct {
		id     uint64
		cached int
		ttftMs float64
	}{{1, 0, 35}, {2, 300, 15}, {3, 0, 45}, {4, 250, 0}} {
		d := byID(t, ds, c.id)
		if d.CachedTokens != c.cached || d.TTFTMs != c.ttftMs {
			t.Errorf("request %d: cached %d, TTFT %v ms; want %d, %v", c.id, d.CachedTokens, d.TTFTMs, c.cached, c.ttftMs)
		}
	}
	if st := e.Stats(); st.CachedTokens != 550 || st.PromptTokens != 1500 {
		t.Errorf("stats cached %d of %d prompt tokens, want 550 of 1500", st.CachedTokens, st.PromptTokens)
	}
}

func TestLRUEvictsOldestPrefix(t *testing.T) {
	p := testParams()
	p.KVCacheTokens = 250 // two blocks of 100
	e := newTest(t, p)
	submit(t, e, 0, 1, 200, 1, 1, 2)
	submit(t, e, ms(100), 2, 200, 1, 3, 4) // evicts 1 and 2
	submit(t, e, ms(200), 3, 200, 1, 3, 4)
	submit(t, e, ms(300), 4, 200, 1, 1, 2)
	ds := drain(e)
	if c := byID(t, ds, 3).CachedTokens; c != 200 {
		t.Errorf("the recent prefix hits %d tokens, want 200", c)
	}
	if c := byID(t, ds, 4).CachedTokens; c != 0 {
		t.Errorf("the evicted prefix hits %d tokens, want 0", c)
	}
	if u := e.Status().PrefixCacheFill; u != 1 {
		t.Errorf("prefix cache fill %v, want 1 (2 of 2 blocks)", u)
	}
}

func TestMaxBatchQueues(t *testing.T) {
	p := testParams()
	p.MaxBatch = 1
	e := newTest(t, p)
	submit(t, e, 0, 1, 1000, 3)
	submit(t, e, ms(10), 2, 1000, 1)
	var ds []Done
	ds = e.Advance(ms(50), ds)
	if s := e.Status(); s.Running != 1 || s.Waiting != 1 {
		t.Fatalf("status %+v, want 1 running, 1 waiting", s)
	}
	ds = append(ds, drain(e)...)
	// A: prefill 0-100, two steps to 141; B waits, prefill 141-241.
	if b := byID(t, ds, 2); b.FirstTokenNs != ms(241) || b.TTFTMs != 231 {
		t.Fatalf("queued request %+v; want first token at 241 ms, TTFT 231 ms", b)
	}
}

func TestKVAdmission(t *testing.T) {
	p := testParams()
	p.KVAdmission = true
	e := newTest(t, p)
	submit(t, e, 0, 1, 600, 101) // reserves 701 of 1000 tokens
	submit(t, e, 0, 2, 300, 100) // 701+400 > 1000: waits for request 1
	submit(t, e, 0, 3, 5000, 1)  // more than the whole cache: admitted alone
	ds := drain(e)
	a, b, c := byID(t, ds, 1), byID(t, ds, 2), byID(t, ds, 3)
	if b.FirstTokenNs != a.FinishNs+ms(30) {
		t.Fatalf("request 2 first token at %d, want request 1's finish %d + 30 ms", b.FirstTokenNs, a.FinishNs)
	}
	if c.FirstTokenNs != b.FinishNs+ms(500) {
		t.Fatalf("request 3 first token at %d, want request 2's finish %d + 500 ms", c.FirstTokenNs, b.FinishNs)
	}
}

func TestSlowdownMultiplies(t *testing.T) {
	e := newTest(t, testParams())
	must(t, e.SetSlowdown(0, 2))
	submit(t, e, 0, 1, 2000, 11)
	if d := drain(e)[0]; d.TTFTMs != 400 || d.FinishNs != ms(400+10*41) {
		t.Fatalf("slowed by 2: %+v; want TTFT 400 ms, finish 810 ms", d)
	}
	// Mid-run: the step under way at 210 ms keeps its 20.5 ms, the other 9
	// take 41 ms.
	e.Reset()
	submit(t, e, 0, 1, 2000, 11)
	must(t, e.SetSlowdown(ms(210), 2))
	if d := drain(e)[0]; d.FinishNs != ms(220.5+9*41) {
		t.Fatalf("slowed at 210 ms: finish %d, want %d", d.FinishNs, ms(220.5+9*41))
	}
}

func TestReplicasScaleCapacity(t *testing.T) {
	p := testParams()
	p.MaxBatch = 1
	e := newTest(t, p)
	must(t, e.SetReplicas(0, 2, 2))
	submit(t, e, 0, 1, 1000, 3)
	submit(t, e, 0, 2, 1000, 3)
	ds := drain(e)
	// Both admitted (2 x MaxBatch 1); 2000 tokens at 2 x 10000 tok/s; steps
	// of 20 + 0.5*2/2 ms.
	for _, id := range []uint64{1, 2} {
		if d := byID(t, ds, id); d.FirstTokenNs != ms(100) || d.FinishNs != ms(141) {
			t.Errorf("request %d %+v; want first 100 ms, finish 141 ms", id, d)
		}
	}
	if s := e.Status(); s.ReadyReplicas != 2 || s.TotalReplicas != 2 {
		t.Errorf("status %+v, want 2 of 2 replicas", s)
	}
	// No ready replica: requests wait until one comes back.
	must(t, e.SetReplicas(ms(1000), 0, 2))
	submit(t, e, ms(1000), 3, 1000, 1)
	if ds := drain(e); len(ds) != 0 || e.Status().Waiting != 1 {
		t.Fatalf("with no ready replica: completions %+v, status %+v", ds, e.Status())
	}
	must(t, e.SetReplicas(ms(2000), 1, 2))
	if d := drain(e); len(d) != 1 || d[0].FirstTokenNs != ms(2100) {
		t.Fatalf("after a replica returns at 2000 ms: %+v, want first token at 2100 ms", d)
	}
}

func TestUnhealthyRejectsButFinishes(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, 0, 1, 1000, 3)
	e.SetHealthy(false)
	submit(t, e, ms(50), 2, 1000, 3)
	if at, ok := e.NextEventTime(); !ok || at != ms(50) {
		t.Fatalf("NextEventTime = %d, %v; want the rejection due at 50 ms", at, ok)
	}
	ds := e.Advance(ms(50), nil)
	want := Done{ID: 2, Tag: 102, ArrivalNs: ms(50), FirstTokenNs: ms(50), FinishNs: ms(50),
		PromptTokens: 1000, OutputTokens: 3, Error: ErrorUnhealthy}
	if len(ds) != 1 || ds[0] != want {
		t.Fatalf("got %+v, want the rejection %+v", ds, want)
	}
	if d := drain(e); len(d) != 1 || d[0].ID != 1 || d[0].Error != "" || d[0].FinishNs != ms(141) {
		t.Fatalf("the running request: %+v, want served at 141 ms", d)
	}
	if st := e.Stats(); st.Rejected != 1 || st.Served != 1 || st.Submitted != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func failedIDs(t *testing.T, seed uint64) []uint64 {
	e := newTest(t, testParams())
	must(t, e.SetErrorRate(0.5, seed))
	for i := range 400 {
		submit(t, e, ms(float64(i)), uint64(i), 100, 2)
	}
	var ids []uint64
	for _, d := range drain(e) {
		if d.Error == ErrorInjected {
			ids = append(ids, d.ID)
			if d.FinishNs < d.ArrivalNs || d.TTFTMs != 0 {
				t.Fatalf("bad failed completion %+v", d)
			}
		} else if d.Error != "" {
			t.Fatalf("unexpected error %+v", d)
		}
	}
	if st := e.Stats(); st.Injected != int64(len(ids)) || st.Served != 400-st.Injected {
		t.Fatalf("stats %+v with %d failures", st, len(ids))
	}
	return ids
}

func TestErrorInjectionDeterministic(t *testing.T) {
	a, b, c := failedIDs(t, 7), failedIDs(t, 7), failedIDs(t, 8)
	if !slices.Equal(a, b) {
		t.Fatal("same seed failed different requests")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds failed the same requests")
	}
	if len(a) < 150 || len(a) > 250 { // 400 draws at p=0.5: 200 +- 5 sd
		t.Fatalf("%d of 400 failed at rate 0.5", len(a))
	}
}

func TestDeterministicAndReset(t *testing.T) {
	run := func(e *Engine) ([]Done, Stats) {
		must(t, e.SetErrorRate(0.1, 3))
		for i := range 300 {
			at := ms(float64(i) * 7)
			if i == 100 {
				must(t, e.SetSlowdown(at, 1.5))
			}
			blocks := []uint64{uint64(i % 5), uint64(i%5)*10 + uint64(i%3)}
			submit(t, e, at, uint64(i), 100+i%250, 1+i%40, blocks...)
		}
		return drain(e), e.Stats()
	}
	e := newTest(t, testParams())
	d1, s1 := run(e)
	e.Reset()
	d2, s2 := run(e)
	d3, s3 := run(newTest(t, testParams()))
	if !slices.Equal(d1, d2) || !slices.Equal(d1, d3) || s1 != s2 || s1 != s3 {
		t.Fatal("the same inputs gave different outputs (after Reset or on a new engine)")
	}
	if len(d1) != 300 || s1.Served == 0 || s1.Injected == 0 || s1.CachedTokens == 0 {
		t.Fatalf("workload too weak to mean anything: %d completions, stats %+v", len(d1), s1)
	}
}

func TestInvalidInput(t *testing.T) {
	bad := []Params{
		{},
		func() Params { p := testParams(); p.MaxBatch = 0; return p }(),
		func() Params { p := testParams(); p.BlockTokens = 0; return p }(),
		func() Params { p := testParams(); p.DecodeBaseMs = -1; return p }(),
		func() Params { p := testParams(); p.KVCacheTokens = -1; return p }(),
		func() Params { p := testParams(); p.Replicas = -1; return p }(),
	}
	for _, p := range bad {
		if _, err := New(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	e := newTest(t, testParams())
	for _, r := range []Request{{OutputTokens: 0}, {PromptTokens: -1, OutputTokens: 1}, {OutputTokens: 1 << 31}} {
		if err := e.Submit(0, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Submit(%+v) = %v, want ErrInvalid", r, err)
		}
	}
	e.Advance(ms(10), nil)
	if err := e.Submit(ms(5), Request{OutputTokens: 1}); !errors.Is(err, ErrPast) {
		t.Errorf("Submit in the past = %v, want ErrPast", err)
	}
	checks := []error{e.SetSlowdown(ms(10), 0), e.SetSlowdown(ms(10), -1), e.SetErrorRate(1.5, 0),
		e.SetReplicas(ms(10), 3, 2), e.SetReplicas(ms(10), -1, 2)}
	for i, err := range checks {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("bad setter %d = %v, want ErrInvalid", i, err)
		}
	}
	if err := e.SetSlowdown(ms(5), 2); !errors.Is(err, ErrPast) {
		t.Errorf("SetSlowdown in the past = %v, want ErrPast", err)
	}
	if st := e.Stats(); st.Submitted != 0 {
		t.Errorf("rejected calls counted as submissions: %+v", st)
	}
}
