package peer

import (
	"testing"
	"time"
)

func newTestAIBrix(t *testing.T, c AIBrixConfig, n int) *aibrix {
	t.Helper()
	r, err := AIBrix(c).New(testFleet(n, 64, 500_000, 9000), 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*aibrix)
}

// The load gate fires when max > 2·(mean+1) and max − min ≥ 8, at the
// first count past each bound; the legacy rule is max − min > 16.
func TestAIBrixGate(t *testing.T) {
	a := newTestAIBrix(t, DefaultAIBrixConfig(), 4)
	for _, tc := range []struct {
		counts []int
		want   bool
	}{
		{[]int{0, 0, 0, 8}, true},  // mean 2: 8 > 6, gap 8 >= 8
		{[]int{0, 0, 0, 7}, false}, // gap 7
		{[]int{1, 1, 10}, false},   // mean 4: 10 is not > 2·5
		{[]int{1, 1, 11}, true},    // mean 13/3: 11 > 10.67, gap 10
		{[]int{4, 4, 4, 12}, false},
	} {
		a.cand = a.cand[:0]
		for e, n := range tc.counts {
			a.cand = append(a.cand, int32(e))
			a.inflight[e] = n
		}
		mean, _ := a.stats()
		if got := a.gate(mean); got != tc.want {
			t.Errorf("counts %v: gate %v, want %v", tc.counts, got, tc.want)
		}
	}
	c := DefaultAIBrixConfig()
	c.ImbalanceAbsCount = 16
	a = newTestAIBrix(t, c, 2)
	a.cand = []int32{0, 1}
	for _, tc := range []struct {
		hi   int
		want bool
	}{{16, false}, {17, true}} {
		a.inflight[0], a.inflight[1] = 0, tc.hi
		if got := a.gate(0); got != tc.want {
			t.Errorf("legacy gate at 0 and %d: %v, want %v", tc.hi, got, tc.want)
		}
	}
}

// Matched pods go by match percent, then fewer requests; the first with
// at most mean + 2·std requests wins (sample std), else the least loaded.
func TestAIBrixStdDevFilter(t *testing.T) {
	a := newTestAIBrix(t, DefaultAIBrixConfig(), 10)
	v := newTestView(10)
	a.req = &Request{PromptTokens: 1024, Blocks: []uint64{1, 2}}
	a.index.add(1, -1, 16, 0, 0)
	a.index.add(2, -1, 16, 0, 0) // pod 0: 100%
	a.index.add(1, -1, 16, 1, 0) // pod 1: 50%
	a.inflight[0] = 6
	for e := 1; e < 10; e++ {
		a.inflight[e] = 1
	}
	// mean 1.5, sample std √2.5 = 1.58: bound 4.66 < 6; no gate (6 is
	// not > 2·2.5 + ... gap 5 < 8).
	if got := a.Pick(v, &Request{PromptTokens: 1024, Blocks: []uint64{1, 2}}); got != 1 {
		t.Fatalf("picked %d, want 1 (pod 0 is over mean + 2 std)", got)
	}
	c := DefaultAIBrixConfig()
	c.StdDevFactor = 3 // bound 6.24: pod 0 passes
	a = newTestAIBrix(t, c, 10)
	a.index.add(1, -1, 16, 0, 0)
	a.index.add(2, -1, 16, 0, 0)
	a.index.add(1, -1, 16, 1, 0)
	a.inflight[0] = 6
	for e := 1; e < 10; e++ {
		a.inflight[e] = 1
	}
	if got := a.Pick(v, &Request{PromptTokens: 1024, Blocks: []uint64{1, 2}}); got != 0 {
		t.Fatalf("with factor 3 picked %d, want 0", got)
	}
	if a.pct[0] != 0 || a.pct[1] != 0 {
		t.Fatal("match percents leak into the next request")
	}
}

// Percent is (i+1)·100/blocks at the last block every kept pod holds;
// the walk keeps only pods holding every block so far.
func TestAIBrixMatchPercent(t *testing.T) {
	a := newTestAIBrix(t, DefaultAIBrixConfig(), 3)
	a.req = &Request{PromptTokens: 3 * 512, Blocks: []uint64{1, 2, 3}}
	a.index.add(1, -1, 16, 0, 0)
	a.index.add(2, -1, 16, 0, 0)
	a.index.add(1, -1, 16, 1, 0)
	a.index.add(3, -1, 16, 1, 0) // after a gap: never reached for pod 1
	a.set = []int32{0, 1, 2}
	a.match(0)
	if a.pct[0] != 32*100/48 || a.pct[1] != 16*100/48 || a.pct[2] != 0 || len(a.matched) != 2 {
		t.Fatalf("percents %v, matched %v; want [66 33 0], two pods", a.pct, a.matched)
	}
}

// The gate narrows the match to the least-loaded pods: the pod holding
// the prefix is skipped while it is far busier.
func TestAIBrixGateNarrowsMatch(t *testing.T) {
	a := newTestAIBrix(t, DefaultAIBrixConfig(), 3)
	v := newTestView(3)
	a.index.add(1, -1, 16, 0, 0)
	a.inflight[0], a.inflight[1], a.inflight[2] = 20, 3, 2 // mean 8.3: 20 > 18.7, gap 18
	if got := a.Pick(v, &Request{PromptTokens: 512, Blocks: []uint64{1}}); got != 2 {
		t.Fatalf("picked %d, want 2", got)
	}
}

// One LRU of BLOCK_NUMBER AIBrix blocks for all pods, and idle blocks
// leave after 20 minutes.
func TestAIBrixIndexLRU(t *testing.T) {
	x := newAIBrixIndex(32, int64(20*time.Minute))
	x.add(1, -1, 16, 0, 0)
	x.add(2, -1, 16, 1, 1)
	x.get(1, 2)            // refreshes 1
	x.add(3, -1, 16, 2, 3) // over 32 blocks: evicts 2, the least recent
	if x.get(2, 4) >= 0 || x.get(1, 4) < 0 || x.get(3, 4) < 0 {
		t.Fatal("wrong block evicted")
	}
	x.expire(int64(20*time.Minute) + 4)
	if x.get(1, int64(21*time.Minute)) >= 0 || x.size != 0 {
		t.Fatalf("idle blocks kept (size %d)", x.size)
	}
	d := DefaultAIBrixConfig()
	if d.BlockChars != 128 || d.BlockNumber != 200000 || d.StdDevFactor != 2 {
		t.Fatal("release overlay settings changed")
	}
}
