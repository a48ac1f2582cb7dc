package peer

import (
	"slices"
	"testing"
)

func newTestLLMD(t *testing.T, c LLMDConfig, n int) *llmd {
	t.Helper()
	r, err := LLMD(c).New(testFleet(n, 64, 500_000, 9000), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*llmd)
}

// The default profile's scores are 3·prefix + 2·queue + 2·(1 − KV use),
// unnormalised: worked by hand for three engines.
func TestLLMDScoresCombineWeights322(t *testing.T) {
	p := newTestLLMD(t, DefaultLLMDConfig(), 3)
	v := newTestView(3)
	p.Poll(v, []Metrics{{Waiting: 0, KVUsage: 0.5}, {Waiting: 4, KVUsage: 0.1}, {Waiting: 4, KVUsage: 0.9}})
	for _, h := range blocks(100, 2) {
		p.index.add(h, 2) // engine 2 holds the whole prompt
	}
	r := &Request{PromptTokens: 1024, Blocks: blocks(100, 2)}
	// e0: queue (4−0)/4 = 1, KV 0.5: 2 + 1 = 3
	// e1: queue 0, KV 0.9: 1.8
	// e2: prefix 16/16 = 1, queue 0, KV 0.1: 3 + 0.2 = 3.2
	if got := p.Pick(v, r); got != 2 {
		t.Fatalf("picked %d, want 2 (3.2 against 3 and 1.8)", got)
	}
	want := []float64{3, 1.8, 3.2}
	for k, s := range p.score {
		if d := s - want[k]; d > 1e-12 || d < -1e-12 {
			t.Errorf("engine %d scored %v, want %v", k, s, want[k])
		}
	}
	// With a prefix weight of 2 the same state goes to engine 0 (2.2 < 3):
	// the weight is what decides.
	c := DefaultLLMDConfig()
	c.PrefixCacheWeight = 2
	q := newTestLLMD(t, c, 3)
	q.Poll(v, []Metrics{{Waiting: 0, KVUsage: 0.5}, {Waiting: 4, KVUsage: 0.1}, {Waiting: 4, KVUsage: 0.9}})
	for _, h := range blocks(100, 2) {
		q.index.add(h, 2)
	}
	if got := q.Pick(v, r); got != 0 {
		t.Fatalf("with prefix weight 2 picked %d, want 0", got)
	}
}

// Equal queues score 1 for all; the load-aware scorer is 0.5 for an
// empty queue and falls linearly to 0 at its threshold.
func TestLLMDScorerShapes(t *testing.T) {
	for _, tc := range []struct {
		q, qmin, qmax int
		want          float64
	}{{3, 3, 3, 1}, {0, 0, 8, 1}, {8, 0, 8, 0}, {2, 0, 8, 0.75}} {
		if got := queueScore(tc.q, tc.qmin, tc.qmax); got != tc.want {
			t.Errorf("queueScore(%d in [%d,%d]) = %v, want %v", tc.q, tc.qmin, tc.qmax, got, tc.want)
		}
	}
	for _, tc := range []struct {
		q    int
		want float64
	}{{0, 0.5}, {1, 0.5 * (1 - 1.0/128)}, {64, 0.25}, {128, 0}, {500, 0}} {
		if got := loadAwareScore(tc.q, 128); got != tc.want {
			t.Errorf("loadAwareScore(%d) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

// The LMBench variant scores 2·prefix + 1·load-aware and nothing else.
func TestLLMDPrefixLoadVariant(t *testing.T) {
	p := newTestLLMD(t, LLMDPrefixLoadConfig(), 2)
	v := newTestView(2)
	p.Poll(v, []Metrics{{Waiting: 0, KVUsage: 0.99}, {Waiting: 64, KVUsage: 0}})
	p.index.add(7, 1)
	// Engine 1 holds half the prompt's blocks (8 of 16): 2·0.5 + 0.25 =
	// 1.25; engine 0: 0.5. KV use plays no part.
	if got := p.Pick(v, &Request{PromptTokens: 1024, Blocks: []uint64{7, 8}}); got != 1 {
		t.Fatalf("picked %d, want 1", got)
	}
	if !slices.Equal(p.score, []float64{0.5, 1.25}) {
		t.Fatalf("scores %v, want [0.5 1.25]", p.score)
	}
}

// The lookup stops at the first block no engine holds, for all engines
// at once: an engine's count can include blocks after a gap of its own.
func TestLLMDGlobalStop(t *testing.T) {
	p := newTestLLMD(t, DefaultLLMDConfig(), 3)
	p.index.add(10, 0)
	p.index.add(10, 1)
	p.index.add(11, 1) // engine 0 misses 11 ...
	p.index.add(12, 0) // ... but holds 12
	p.index.add(13, 2) // behind block 12, which engine 2 lacks
	span := newBlockSpan(512, 4*512, 64, true, 2048)
	p.matchPrefix([]uint64{10, 11, 12, 13}, span)
	if want := []int{16, 16, 8}; !slices.Equal(p.match, want) {
		t.Fatalf("matched router blocks %v, want %v (8 per trace block)", p.match, want)
	}
	clear(p.match)
	p.matchPrefix([]uint64{10, 99, 12}, span) // 99: nobody, the walk stops
	if want := []int{8, 8, 0}; !slices.Equal(p.match, want) {
		t.Fatalf("after a block nobody holds: %v, want %v", p.match, want)
	}
}

// Exact ties rotate through the tied engines in order (the picker's
// round-robin counter), and the chosen engine's LRU gets the request's
// blocks, so the next turn finds them.
func TestLLMDTiesRotateAndIndexLearns(t *testing.T) {
	p := newTestLLMD(t, DefaultLLMDConfig(), 3)
	v := newTestView(3)
	var got []int
	for k := range 4 {
		got = append(got, p.Pick(v, &Request{PromptTokens: 512, Blocks: []uint64{uint64(1000 + k)}}))
	}
	if want := []int{0, 1, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("tied picks %v, want %v", got, want)
	}
	// The next turn of the second request (on engine 1) extends its
	// prompt: engine 1 holds 1 of its 2 trace blocks (8 of 16 router
	// blocks), a prefix score of 0.5 the others lack.
	if e := p.Pick(v, &Request{PromptTokens: 1024, Blocks: []uint64{1001, 2000}}); e != 1 {
		t.Fatalf("follow-up went to %d, want 1", e)
	}
}

// Auto-tuning: vLLM's 16-token blocks are raised to 64, the cap is
// 131072/64 blocks, and each LRU holds num_gpu_blocks = 500000/16 router
// blocks, 31250·64/512 = 3906 trace blocks.
func TestLLMDAutoTune(t *testing.T) {
	p := newTestLLMD(t, DefaultLLMDConfig(), 1)
	if p.b != 64 || p.maxBlocks != 2048 || p.index.lists[0].cap != 3906 {
		t.Fatalf("block %d, cap %d blocks, LRU %d trace blocks; want 64, 2048, 3906", p.b, p.maxBlocks, p.index.lists[0].cap)
	}
	c := DefaultLLMDConfig()
	c.AutoTune, c.MaxPrefixTokens = false, 0 // GIE v1.x: 16-token blocks, 256 of them, 31250 entries
	q := newTestLLMD(t, c, 1)
	if q.b != 16 || q.maxBlocks != 256 || q.index.lists[0].cap != 976 {
		t.Fatalf("without auto-tune: block %d, cap %d, LRU %d; want 16, 256, 976", q.b, q.maxBlocks, q.index.lists[0].cap)
	}
	// 256 blocks of 16 tokens reach 4096 tokens: 8 trace blocks of a
	// 20-block prompt are hashed and matched, no more.
	if n := newBlockSpan(512, 20*512, 16, true, 256).traceBlocks(20); n != 8 {
		t.Fatalf("hashed trace blocks %d, want 8", n)
	}
}

func TestLLMDConfigValidate(t *testing.T) {
	c := DefaultLLMDConfig()
	c.QueueWeight = -1
	if _, err := LLMD(c).New(testFleet(1, 1, 1, 1), 0, 1); err == nil {
		t.Fatal("negative weight accepted")
	}
	if (&llmd{}).PollInterval() != 0 || DefaultLLMDConfig().PollInterval.Milliseconds() != 50 {
		t.Fatal("llm-d polls every 50 ms")
	}
}

// Evicting a block from an engine's LRU removes the engine from its
// holders; a block nobody holds leaves the table.
func TestHolderIndexLRU(t *testing.T) {
	x := newHolderIndex([]int{2, 2})
	x.add(1, 0)
	x.add(2, 0)
	x.add(1, 0) // 1 is now the most recent
	x.add(3, 0) // evicts 2
	if x.holders(2) != nil || len(x.holders(1)) != 1 || len(x.holders(3)) != 1 {
		t.Fatalf("after eviction: holders(1)=%v holders(2)=%v holders(3)=%v", x.holders(1), x.holders(2), x.holders(3))
	}
	x.add(1, 1)
	if hs := x.holders(1); len(hs) != 2 {
		t.Fatalf("block 1 held by %v, want engines 0 and 1", hs)
	}
	x.add(4, 0) // evicts 1 from engine 0 only
	if hs := x.holders(1); len(hs) != 1 || hs[0].engine != 1 {
		t.Fatalf("block 1 held by %v, want engine 1 alone", hs)
	}
	if _, ok := x.slot.get(2); ok || x.slot.len() != 3 {
		t.Fatalf("table has %d entries (2 present: %v), want 3 without 2", x.slot.len(), ok)
	}
}

// A block held by three engines spills its holders out of line and back.
func TestHolderIndexManyHolders(t *testing.T) {
	x := newHolderIndex([]int{1, 1, 1})
	for e := range 3 {
		x.add(9, e)
	}
	engines := func() []int32 {
		var out []int32
		for _, h := range x.holders(9) {
			out = append(out, h.engine)
		}
		slices.Sort(out)
		return out
	}
	if got := engines(); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("holders %v, want [0 1 2]", got)
	}
	x.add(8, 1) // evicts 9 from engine 1
	if got := engines(); !slices.Equal(got, []int32{0, 2}) {
		t.Fatalf("holders %v, want [0 2]", got)
	}
	x.add(7, 0)
	x.add(6, 2)
	if x.holders(9) != nil {
		t.Fatalf("block 9 still held by %v", x.holders(9))
	}
	x.add(9, 1) // the freed entry is reused cleanly
	if got := engines(); !slices.Equal(got, []int32{1}) {
		t.Fatalf("holders %v, want [1]", got)
	}
}

// The stamped log keeps the exact LRU order over many refreshes, and the
// log stays bounded.
func TestHolderIndexLRUOrder(t *testing.T) {
	x := newHolderIndex([]int{3})
	for round := range 1000 {
		// Refresh 1 and 2 every round, add a new block: the new one of the
		// previous round is always the one evicted.
		x.add(1, 0)
		x.add(2, 0)
		x.add(uint64(100+round), 0)
		if round > 0 && x.holders(uint64(100+round-1)) != nil {
			t.Fatalf("round %d: block %d outlived fresher ones", round, 100+round-1)
		}
		if x.holders(1) == nil || x.holders(2) == nil {
			t.Fatalf("round %d: a refreshed block was evicted", round)
		}
	}
	if l := x.lists[0]; l.recs.len() > 4*l.cap+64 || l.size != 3 {
		t.Fatalf("log of %d records for %d blocks", l.recs.len(), l.size)
	}
}
