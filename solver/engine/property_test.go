package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// workload is a small engine scenario decoded from bytes, so that the
// property test and the fuzzer share one generator.
type workload struct {
	p       Params
	errRate float64
	seed    uint64
	events  []event
}

type event struct {
	at           int64
	op           byte // 's' submit, 'd' slowdown, 'r' replicas, 'h' health
	advanceFirst bool // call Advance(at) on both engines before the event
	extraAdvance bool // call Advance at Engine's next event time, if earlier
	req          Request
	slowdown     float64
	ready        int
	healthy      bool
}

func workloadFromBytes(data []byte) workload {
	var hdr [8]byte
	copy(hdr[:], data)
	w := workload{p: Params{
		MaxBatch:          1 + int(hdr[0]%4),
		BlockTokens:       4 + int(hdr[1]%13),
		PrefillTokensPerS: 1000 + 100*float64(hdr[3]),
		DecodeBaseMs:      float64(hdr[4] % 8),
		DecodePerSeqMs:    0.25 * float64(hdr[5]%5),
		KVAdmission:       hdr[6]&1 != 0,
		PrefillOverheadMs: 0.5 * float64((hdr[6]>>1)%3),
		Replicas:          1 + int((hdr[6]>>3)%2),
	}}
	w.p.KVCacheTokens = int(hdr[2]%12)*w.p.BlockTokens + int(hdr[2]>>7)*3
	if hdr[6]&0x10 != 0 {
		// Budgets from MaxBatch (every step can be full of decodes) up to
		// more than most prompts.
		w.p.Scheduler = SchedulerChunked
		w.p.MaxNumBatchedTokens = w.p.MaxBatch + 7*int(hdr[6]>>5)
	}
	if w.p.DecodeBaseMs+w.p.DecodePerSeqMs == 0 {
		w.p.DecodeBaseMs = 0.001 // a 1 us step: time must move
	}
	w.errRate, w.seed = 0.15*float64(hdr[7]%4), uint64(hdr[7])
	var t int64
	for i := 8; i+4 <= len(data); i += 4 {
		op, gap, a, b := data[i], data[i+1], data[i+2], data[i+3]
		if gap%4 != 0 {
			t += int64(gap) * 250_000
		}
		ev := event{at: t, advanceFirst: op&0x80 != 0, extraAdvance: op&0x40 != 0}
		switch k := op % 16; {
		case k <= 10:
			ev.op = 's'
			ev.req = Request{ID: uint64(len(w.events)), Tag: uint64(i), PromptTokens: int(a % 48), OutputTokens: 1 + int(b%7)}
			for j := range int(a % 5) {
				ev.req.Blocks = append(ev.req.Blocks, uint64(b%3)*100+uint64(j))
			}
			if a&0x40 != 0 && len(ev.req.Blocks) > 0 {
				ev.req.Blocks[0] = 1000 + uint64(b)
			}
		case k <= 12:
			ev.op, ev.slowdown = 'd', 0.25+float64(a%16)/4
		case k <= 14:
			ev.op, ev.ready = 'r', int(a%3)
		default:
			ev.op, ev.healthy = 'h', a%4 != 0
		}
		w.events = append(w.events, ev)
	}
	return w
}

// checkAgainstReference runs w on Engine and refEngine and fails on the
// first difference in state or output.
func checkAgainstReference(t *testing.T, w workload) {
	t.Helper()
	e, err := New(w.p)
	if err != nil {
		t.Fatalf("New(%+v): %v", w.p, err)
	}
	g := newRef(w.p)
	must(t, e.SetErrorRate(w.errRate, w.seed))
	g.errRate, g.rng = w.errRate, splitmix{state: w.seed}
	var got, want []Done
	submits := 0
	for i, ev := range w.events {
		if ev.extraAdvance {
			if at, ok := e.NextEventTime(); ok && at < ev.at {
				got, want = e.Advance(at, got), g.Advance(at, want)
			}
		}
		if ev.advanceFirst {
			got, want = e.Advance(ev.at, got), g.Advance(ev.at, want)
		}
		switch ev.op {
		case 's':
			submits++
			must(t, e.Submit(ev.at, ev.req))
			g.Submit(ev.at, ev.req)
		case 'd':
			must(t, e.SetSlowdown(ev.at, ev.slowdown))
			g.SetSlowdown(ev.at, ev.slowdown)
		case 'r':
			must(t, e.SetReplicas(ev.at, ev.ready, 2))
			g.SetReplicas(ev.at, ev.ready, 2)
		case 'h':
			e.SetHealthy(ev.healthy)
			g.healthy = ev.healthy
		}
		compareState(t, i, e, g)
	}
	end := int64(0)
	if n := len(w.events); n > 0 {
		end = w.events[n-1].at
	}
	must(t, e.SetReplicas(end, 1, 2))
	g.SetReplicas(end, 1, 2)
	got, want = e.Advance(math.MaxInt64, got), g.Advance(math.MaxInt64, want)
	compareRuns(t, e, g, got, want, submits)
}

func compareState(t *testing.T, i int, e *Engine, g *refEngine) {
	t.Helper()
	s := e.Status()
	if s.Running != len(g.prefill)+len(g.running) || s.Waiting != len(g.waiting) {
		t.Fatalf("event %d: running %d waiting %d, reference %d %d", i, s.Running, s.Waiting, len(g.prefill)+len(g.running), len(g.waiting))
	}
	if h, want := e.kvHeldTokens(), g.held(); h != want {
		t.Fatalf("event %d: %d KV tokens held, reference %d", i, h, want)
	}
	if k := lruKeys(&e.cache); !slices.Equal(k, g.cache) && len(k)+len(g.cache) > 0 {
		t.Fatalf("event %d: cache %v, reference %v", i, k, g.cache)
	}
}

func compareRuns(t *testing.T, e *Engine, g *refEngine, got, want []Done, submits int) {
	t.Helper()
	if len(got) != submits {
		t.Fatalf("%d completions for %d submissions", len(got), submits)
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("completion %d:\n got  %+v\n want %+v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d completions, reference %d", len(got), len(want))
	}
	st := e.Stats()
	if st.Served != g.served || st.DecodeSteps != g.steps || st.PrefillNs != g.prefillNs || st.DecodeNs != g.decodeNs {
		t.Fatalf("stats %+v; reference served %d steps %d prefill %d ns decode %d ns", st, g.served, g.steps, g.prefillNs, g.decodeNs)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMatchesReference compares Engine with the step-by-step reference on
// random small workloads: same completions, in the same order, to the
// nanosecond.
func TestMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		data := make([]byte, 8+4*(1+rng.IntN(60)))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		func() {
			defer func() {
				if t.Failed() {
					t.Logf("workload bytes: %x", data)
				}
			}()
			checkAgainstReference(t, workloadFromBytes(data))
		}()
	}
}

func FuzzMatchesReference(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		data := make([]byte, 8+4*40)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8+4*200 {
			data = data[:8+4*200]
		}
		checkAgainstReference(t, workloadFromBytes(data))
	})
}
