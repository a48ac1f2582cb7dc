package engine

import (
	"slices"
	"testing"
)

func chunkedParams(budget int) Params {
	p := testParams()
	p.Scheduler, p.MaxNumBatchedTokens = SchedulerChunked, budget
	return p
}

// A prompt longer than the budget is prefilled in chunks, each step
// paying the decode base: 2000 tokens at a 1000-token budget take two
// steps of 20 + 100 ms.
func TestChunkedSingleRequestKnownAnswer(t *testing.T) {
	e := newTest(t, chunkedParams(1000))
	submit(t, e, 0, 1, 2000, 11)
	ds := drain(e)
	want := Done{ID: 1, Tag: 101, FirstTokenNs: ms(240), FinishNs: ms(240 + 10*20.5),
		TTFTMs: 240, TBOTMs: 20.5, PromptTokens: 2000, OutputTokens: 11}
	if len(ds) != 1 || ds[0] != want {
		t.Fatalf("got %+v\nwant %+v", ds, want)
	}
	st := e.Stats()
	if st.Prefills != 2 || st.PrefillNs != ms(240) || st.DecodeSteps != 10 || st.DecodeNs != ms(205) {
		t.Fatalf("stats %+v: want 2 chunked steps (240 ms) and 10 decode steps (205 ms)", st)
	}
}

// Decodes come first: a running request keeps producing a token every
// step while a long prompt is prefilled beside it, and the step lasts the
// decode step plus the chunk.
func TestChunkedDecodesKeepGoing(t *testing.T) {
	e := newTest(t, chunkedParams(1000))
	e.EnableFirstTokens(true)
	submit(t, e, 0, 1, 500, 5)       // step 0-70 ms (20 + 50): first token
	submit(t, e, ms(10), 2, 3000, 1) // waits for the boundary at 70 ms
	ds := drain(e)
	// From 70 ms: A decodes 1 token per step; B takes 999, 999, 999, 3
	// tokens: steps of 20 + 0.5 + 99.9 ms three times, then 20.5 + 0.3.
	a, b := byID(t, ds, 1), byID(t, ds, 2)
	step := 20 + 0.5 + 99.9
	if a.FinishNs != ms(70+3*step+20.5+0.3) {
		t.Errorf("A finished at %v ms, want %v (4 tokens in B's 4 steps)", float64(a.FinishNs)/1e6, 70+3*step+20.8)
	}
	if b.FirstTokenNs != a.FinishNs {
		t.Errorf("B's first token at %v ms, want with A's last (%v ms)", float64(b.FirstTokenNs)/1e6, float64(a.FinishNs)/1e6)
	}
}

// A prefix hit skips the cached part of the prompt in chunked mode too.
func TestChunkedPrefixHitSkipsCachedTokens(t *testing.T) {
	e := newTest(t, chunkedParams(1000))
	submit(t, e, 0, 1, 800, 1, 1, 2, 3, 4, 5, 6, 7, 8)
	drain(e)
	submit(t, e, ms(1000), 2, 850, 1, 1, 2, 3, 4, 5, 6, 7, 8)
	d := drain(e)[0]
	if d.CachedTokens != 800 || d.TTFTMs != 20+5 {
		t.Fatalf("got %+v, want 800 cached tokens and a 25 ms step (20 + 50 tokens)", d)
	}
}

// TestLongPromptDoesNotStallDecodes: 32 requests decode on a busy h100
// engine, finishing one per step (outputs 200-231), when a 12k-token
// prompt arrives a few steps after the first finish. Their finish times mark the step boundaries. Without
// chunked prefill one iteration computes the whole prompt and every
// decode waits 12000/9282 s = 1.29 s for its next token. With chunked
// prefill (budget 8192) the prompt is split over two steps, and the
// longest gap between two tokens is one full step: 8192-32 prompt tokens
// and 32 decodes, 28.9 + 32·0.334 + 8160/9282·1000 = 919 ms.
func TestLongPromptDoesNotStallDecodes(t *testing.T) {
	const n = 32
	p, _ := DefaultParams("h100")
	// longestGap returns the longest gap between finishes, and the first
	// finish. The prompt arrives at promptAt when it is not negative.
	longestGap := func(sched Scheduler, promptAt int64) (float64, int64) {
		p.Scheduler = sched
		e := newTest(t, p)
		for k := range n {
			submit(t, e, 0, uint64(k), 100, 200+k)
		}
		if promptAt >= 0 {
			e.Advance(promptAt, nil)
			submit(t, e, promptAt, 99, 12_000, 1)
		}
		var fin []int64
		for _, d := range drain(e) {
			if d.ID != 99 {
				fin = append(fin, d.FinishNs)
			}
		}
		slices.Sort(fin)
		gap := 0.0
		for i := 1; i < len(fin); i++ {
			gap = max(gap, float64(fin[i]-fin[i-1])/1e6)
		}
		return gap, fin[0]
	}
	fullStep := p.DecodeBaseMs + n*p.DecodePerSeqMs + float64(p.MaxNumBatchedTokens-n)/p.PrefillTokensPerS*1000
	base, first := longestGap(SchedulerChunked, -1)
	at := first + ms(100) // a few steps after the first finish
	chunked, _ := longestGap(SchedulerChunked, at)
	whole, _ := longestGap(SchedulerWhole, at)
	t.Logf("longest gap between finishes: no prompt %.1f ms, chunked %.1f ms, whole %.1f ms; one full step %.1f ms", base, chunked, whole, fullStep)
	if base > 45 {
		t.Fatalf("without the prompt the longest gap is %.1f ms, want one decode step", base)
	}
	if chunked > fullStep+0.01 {
		t.Errorf("chunked: decodes stalled %.1f ms, more than one full step (%.1f ms)", chunked, fullStep)
	}
	if want := 12_000 / p.PrefillTokensPerS * 1000; whole < want {
		t.Errorf("whole: longest gap %.1f ms, want the whole prompt's %.1f ms (the test no longer sees the stall)", whole, want)
	}
}

func TestChunkedParamsValidate(t *testing.T) {
	p := chunkedParams(7) // less than MaxBatch 8
	if err := p.Validate(); err == nil {
		t.Fatal("a budget below max_batch is accepted")
	}
	q, _ := Params{Scheduler: SchedulerChunked}.WithDefaults("a100")
	if q.MaxNumBatchedTokens != 2048 {
		t.Fatalf("a100 budget %d, want vLLM's 2048", q.MaxNumBatchedTokens)
	}
	q, _ = Params{Scheduler: SchedulerChunked, PrefillTokensPerS: 1, DecodeBaseMs: 1, MaxBatch: 4, BlockTokens: 1}.WithDefaults("tpu")
	if q.MaxNumBatchedTokens != DefaultMaxNumBatchedTokens || q.Validate() != nil {
		t.Fatalf("unknown SKU: budget %d (%v), want %d", q.MaxNumBatchedTokens, q.Validate(), DefaultMaxNumBatchedTokens)
	}
	for _, s := range []string{"chunked", "whole", "Chunked"} {
		if _, err := ParseScheduler(s); err != nil {
			t.Errorf("ParseScheduler(%q): %v", s, err)
		}
	}
	if _, err := ParseScheduler("chunky"); err == nil {
		t.Error(`ParseScheduler("chunky") accepted`)
	}
}
