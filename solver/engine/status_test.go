package engine

import (
	"math/rand/v2"
	"testing"
)

// TestKVUtilizationIsHeldNotCached checks that KVUtilization counts the
// KV memory of running requests, as vLLM's kv_cache_usage_perc does, and
// not the prefix cache, which stays full once the requests are gone.
func TestKVUtilizationIsHeldNotCached(t *testing.T) {
	p := testParams()
	p.KVCacheTokens = 10_000 // 100 blocks of 100 tokens
	e := newTest(t, p)
	blocks := make([]uint64, 100)
	for i := range blocks {
		blocks[i] = uint64(i + 1)
	}
	// 9000 prompt tokens prefill in 900 ms, then 11 decode steps of 20.5 ms.
	submit(t, e, 0, 1, 9000, 12, blocks[:90]...)
	e.Advance(0, nil) // admitted at 0
	if got := e.Status().KVUtilization; got != 0.9 {
		t.Errorf("in prefill: KV utilisation %v, want 0.9 (the prompt)", got)
	}
	e.Advance(ms(900+4*20.5), nil)
	if got := e.Status().KVUtilization; got != 0.9005 {
		t.Errorf("after 4 decode steps: KV utilisation %v, want 0.9005 (prompt + 5 tokens)", got)
	}
	drain(e)
	s := e.Status()
	if s.KVUtilization != 0 || s.PrefixCacheFill != 0.9 {
		t.Errorf("idle: KV utilisation %v, prefix cache fill %v; want 0 and 0.9", s.KVUtilization, s.PrefixCacheFill)
	}
}

func TestFirstTokens(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, 0, 9, 1000, 1)
	drain(e)
	if got := e.TakeFirstTokens(nil); len(got) != 0 {
		t.Fatalf("recording off: got %v", got)
	}
	e.EnableFirstTokens(true)
	// A prefills 100-200 ms; B, arriving during it, 200-250 ms.
	submit(t, e, ms(100), 1, 1000, 3)
	submit(t, e, ms(110), 2, 500, 1)
	e.Advance(ms(220), nil)
	got := e.TakeFirstTokens(nil)
	if want := (FirstToken{ID: 1, Tag: 101, AtNs: ms(200)}); len(got) != 1 || got[0] != want {
		t.Fatalf("by 220 ms: first tokens %+v, want [%+v]", got, want)
	}
	drain(e)
	got = e.TakeFirstTokens(got[:0])
	if want := (FirstToken{ID: 2, Tag: 102, AtNs: ms(250)}); len(got) != 1 || got[0] != want {
		t.Fatalf("first tokens %+v, want [%+v]", got, want)
	}
	if got := e.TakeFirstTokens(nil); len(got) != 0 {
		t.Fatalf("taken twice: %v", got)
	}
}

// TestFirstTokensMatchDone checks on random workloads that every served
// request gets exactly one first token, at its Done's FirstTokenNs, in
// order of time.
func TestFirstTokensMatchDone(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		data := make([]byte, 8+4*(1+rng.IntN(60)))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		checkFirstTokens(t, workloadFromBytes(data))
	}
}

func checkFirstTokens(t *testing.T, w workload) {
	t.Helper()
	e := newTest(t, w.p)
	e.EnableFirstTokens(true)
	var ds []Done
	var fs []FirstToken
	for _, ev := range w.events {
		if ev.op == 's' {
			must(t, e.Submit(ev.at, ev.req))
			fs = e.TakeFirstTokens(fs)
		}
	}
	for {
		at, ok := e.NextEventTime()
		if !ok {
			break
		}
		ds = e.Advance(at, ds)
		fs = e.TakeFirstTokens(fs)
	}
	first := map[uint64]int64{}
	for i, f := range fs {
		if _, dup := first[f.ID]; dup {
			t.Fatalf("request %d has two first tokens", f.ID)
		}
		if i > 0 && f.AtNs < fs[i-1].AtNs {
			t.Fatalf("first tokens out of order: %+v", fs)
		}
		first[f.ID] = f.AtNs
	}
	served := 0
	for _, d := range ds {
		if d.Error != "" {
			continue
		}
		served++
		if at, ok := first[d.ID]; !ok || at != d.FirstTokenNs {
			t.Fatalf("request %d: first token %d (%v), Done says %d", d.ID, at, ok, d.FirstTokenNs)
		}
	}
	if served != len(fs) {
		t.Fatalf("%d served, %d first tokens", served, len(fs))
	}
}

func TestStatusAllocatesNothing(t *testing.T) {
	e := newTest(t, testParams())
	submit(t, e, 0, 1, 1000, 50)
	e.Advance(ms(300), nil)
	if n := testing.AllocsPerRun(100, func() { _ = e.Status() }); n != 0 {
		t.Fatalf("Status allocates %v times", n)
	}
}
