package peer

import (
	"testing"
	"time"
)

func newTestSGLang(t *testing.T, c SGLangConfig, n int) *sglang {
	t.Helper()
	r, err := SGLang(c).New(testFleet(n, 64, 500_000, 9000), 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*sglang)
}

// The imbalance switch needs both max − min > 64 and max > 1.5·min, and
// fires at exactly the first load past each, not one below.
func TestSGLangImbalanceThresholds(t *testing.T) {
	s := newTestSGLang(t, DefaultSGLangConfig(), 2)
	for _, tc := range []struct {
		lo, hi int
		want   bool
	}{
		{0, 64, false}, {0, 65, true}, // absolute: 64 is not > 64
		{130, 195, false}, {130, 196, true}, // relative: 195 is not > 1.5·130
		{200, 280, false}, // 80 apart but only 1.4×
		{0, 0, false},
	} {
		s.inflight[0], s.inflight[1] = tc.lo, tc.hi
		if got := s.imbalanced([]int32{0, 1}); got != tc.want {
			t.Errorf("loads %d and %d: imbalanced %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	// Loads count every worker, healthy or not: a down worker at 0
	// makes the others look imbalanced.
	v := newTestView(3)
	v.down[0] = true
	s = newTestSGLang(t, DefaultSGLangConfig(), 3)
	s.inflight[1], s.inflight[2] = 70, 66
	if got := s.Pick(v, &Request{PromptTokens: 512, Blocks: []uint64{1}}); got != 2 {
		t.Fatalf("imbalanced (down worker at 0): picked %d, want 2, the least loaded healthy one", got)
	}
	if s.inflight[2] != 67 {
		t.Fatalf("in-flight %d after dispatch, want 67", s.inflight[2])
	}
	s.Completed(v, nil, 2, false)
	if s.inflight[2] != 66 {
		t.Fatal("completion does not decrement the load")
	}
}

// Balanced: a match above 30% of the text goes to the matched tenant;
// at exactly 30% it is a miss, which goes to the smallest tree.
func TestSGLangCacheThreshold(t *testing.T) {
	s := newTestSGLang(t, DefaultSGLangConfig(), 3)
	v := newTestView(3)
	prompt := blocks(100, 10) // 10 blocks of 512 tokens
	s.req = &Request{PromptTokens: 4 * 512}
	found := []int32{-1, -1, -1, -1}
	s.tree.insert(prompt[:4], s.charsOf, found, 1, 0) // tenant 1 holds 4 blocks: 8192 characters
	hit := s.Pick(v, &Request{PromptTokens: 10 * 512, Blocks: prompt})
	if hit != 1 {
		t.Fatalf("match 4/10 > 0.3: picked %d, want 1", hit)
	}
	s = newTestSGLang(t, DefaultSGLangConfig(), 3)
	s.req = &Request{PromptTokens: 3 * 512}
	s.tree.insert(prompt[:3], s.charsOf, found[:3], 1, 0)
	miss := s.Pick(v, &Request{PromptTokens: 10 * 512, Blocks: prompt})
	if miss == 1 || s.tree.size[miss] != 10*512*4 {
		t.Fatalf("match 3/10 = 0.3 is a miss: picked %d (tree %d chars), want a smallest tree, now 20480", miss, s.tree.size[miss])
	}
	// The next request of that prefix now matches the new tenant fully.
	if again := s.Pick(v, &Request{PromptTokens: 10 * 512, Blocks: prompt}); again != miss && again != 1 {
		t.Fatalf("repeat went to %d", again)
	}
}

// A matched tenant that is down: the first healthy worker, no insert.
func TestSGLangUnhealthyFallback(t *testing.T) {
	s := newTestSGLang(t, DefaultSGLangConfig(), 3)
	v := newTestView(3)
	prompt := blocks(1, 4)
	s.req = &Request{PromptTokens: 4 * 512}
	s.tree.insert(prompt, s.charsOf, []int32{-1, -1, -1, -1}, 2, 0)
	v.down[2] = true
	if got := s.Pick(v, &Request{PromptTokens: 4 * 512, Blocks: prompt}); got != 0 {
		t.Fatalf("picked %d, want 0, the first healthy", got)
	}
	if s.tree.size[0] != 0 {
		t.Fatal("the fallback inserted the text")
	}
}

// Every eviction interval, a tenant over max_tree_size loses its least
// recently used leaves until it fits; nodes nobody holds leave the tree.
func TestSGLangEviction(t *testing.T) {
	c := DefaultSGLangConfig()
	c.MaxTreeSize = 3 * 2048 // three blocks
	s := newTestSGLang(t, c, 2)
	s.req = &Request{PromptTokens: 3 * 512}
	// Tenant 0: path a (blocks 1,2,3) at t=1, path b (1,5) at t=2.
	s.tree.insert([]uint64{1, 2, 3}, s.charsOf, []int32{-1, -1, -1}, 0, 1)
	s.tree.insert([]uint64{1, 5}, s.charsOf, []int32{-1, -1}, 0, 2)
	s.tree.insert([]uint64{1, 5}, s.charsOf, []int32{-1, -1}, 1, 3)
	if s.tree.size[0] != 4*2048 {
		t.Fatalf("tenant 0 holds %d chars, want 4 blocks", s.tree.size[0])
	}
	s.tree.evict(c.MaxTreeSize)
	// The oldest leaf is 3 (t=1): dropping it leaves 3 blocks.
	if s.tree.size[0] != 3*2048 || s.tree.size[1] != 2*2048 {
		t.Fatalf("after eviction sizes %v, want [6144 4096]", s.tree.size)
	}
	if _, ok := s.tree.nodes.get(3); ok {
		t.Fatal("block 3, held by nobody, is still in the tree")
	}
	// Pick runs the eviction on its 120 s schedule.
	if s.nextEvict != int64(120*time.Second) {
		t.Fatalf("next eviction at %d", s.nextEvict)
	}
}
