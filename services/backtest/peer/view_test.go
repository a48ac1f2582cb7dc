package peer

import "slices"

// testView is a View over a fleet of n engines in one cluster, with the
// health, time, cached prefixes and backlogs a test sets.
type testView struct {
	now     int64
	down    map[int]bool
	members []int32
	cached  map[int]int // engine -> leading blocks cached
	backlog []int64
	flight  []int
}

func newTestView(n int) *testView {
	v := &testView{down: map[int]bool{}, cached: map[int]int{}, backlog: make([]int64, n), flight: make([]int, n)}
	for e := range n {
		v.members = append(v.members, int32(e))
	}
	return v
}

func (v *testView) Now() int64 { return v.now }

func (v *testView) Candidates(dst []int32) []int32 {
	for _, e := range v.members {
		if !v.down[int(e)] {
			dst = append(dst, e)
		}
	}
	return dst
}

func (v *testView) Members() []int32 { return slices.Clone(v.members) }

func (v *testView) CachedBlocks(e int, blocks []uint64) int { return min(v.cached[e], len(blocks)) }

func (v *testView) PrefillBacklog(e int) int64 { return v.backlog[e] }

// testFleet is n engines of one region with the slots, KV and prefill
// rate given, 512-token blocks, one cluster using them all.
func testFleet(n, slots, kvTokens int, prefill float64) *Fleet {
	f := &Fleet{BlockTokens: 512, TTFTSLOMs: 2000}
	c := Cluster{Name: "c", Region: "r"}
	for e := range n {
		f.Engines = append(f.Engines, Engine{Name: string(rune('a' + e)), Region: "r", Slots: slots,
			KVCacheTokens: kvTokens, PrefillTokensPerS: prefill})
		c.Eligible = append(c.Eligible, int32(e))
		c.NetworkMs = append(c.NetworkMs, 1)
	}
	f.Clusters = []Cluster{c}
	return f
}

// blocks returns n prefix-chained block ids starting at base.
func blocks(base uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

func (v *testView) InFlight(e int) int { return v.flight[e] }
