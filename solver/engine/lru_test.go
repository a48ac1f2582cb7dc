package engine

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// lruKeys lists the cached blocks from most to least recently used.
func lruKeys(c *blockLRU) []uint64 {
	var out []uint64
	for n := c.head; n != nilNode; n = c.nodes[n].next {
		out = append(out, c.nodes[n].key)
	}
	return out
}

func TestLRU(t *testing.T) {
	c := newBlockLRU(3)
	c.touchAll([]uint64{1, 2, 3})
	if got, want := lruKeys(&c), []uint64{1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("after touchAll(1,2,3): %v, want %v (head of the prefix most recent)", got, want)
	}
	if got := c.prefixHits([]uint64{1, 2, 9, 3}); got != 2 {
		t.Fatalf("prefixHits(1,2,9,3) = %d, want 2: a hit after a miss does not count", got)
	}
	c.touch(4) // evicts 3, the least recently used
	if got, want := lruKeys(&c), []uint64{4, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("after touch(4): %v, want %v", got, want)
	}
	c.touch(2)
	if got, want := lruKeys(&c), []uint64{2, 4, 1}; !slices.Equal(got, want) {
		t.Fatalf("after touch(2): %v, want %v", got, want)
	}
	c.setCapacity(1)
	if got, want := lruKeys(&c), []uint64{2}; !slices.Equal(got, want) || c.size != 1 || c.index.size != 1 {
		t.Fatalf("after shrink to 1: %v (size %d, index %d), want %v", got, c.size, c.index.size, want)
	}
	c.setCapacity(3)
	c.touchAll([]uint64{7, 8})
	if got, want := lruKeys(&c), []uint64{7, 8, 2}; !slices.Equal(got, want) {
		t.Fatalf("after regrow: %v, want %v", got, want)
	}
	if len(c.nodes) != 3 {
		t.Fatalf("%d nodes after shrink and regrow, want the 3 freed ones reused", len(c.nodes))
	}
	c.reset(0)
	c.touch(5)
	if c.size != 0 || c.prefixHits([]uint64{5}) != 0 {
		t.Fatalf("a zero-capacity cache holds %d blocks", c.size)
	}
}

// TestBlockIndexMatchesMap checks the hash table against a Go map under
// random inserts and deletes, with clustered keys that stress probing.
func TestBlockIndexMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var x blockIndex
	m := map[uint64]int32{}
	var keys []uint64
	for i := range 200_000 {
		k := uint64(rng.IntN(3000)) << (rng.IntN(3) * 20) // small, shifted and sequential keys
		if n, ok := m[k]; ok {
			got, gok := x.get(k)
			if !gok || got != n {
				t.Fatalf("op %d: get(%d) = %d, %v; want %d", i, k, got, gok, n)
			}
			if rng.IntN(2) == 0 {
				x.remove(k)
				delete(m, k)
			}
			continue
		}
		if _, ok := x.get(k); ok {
			t.Fatalf("op %d: get(%d) found a deleted key", i, k)
		}
		m[k] = int32(i)
		x.put(k, int32(i))
		keys = append(keys, k)
	}
	if x.size != len(m) {
		t.Fatalf("size %d, map %d", x.size, len(m))
	}
	for _, k := range keys {
		n, ok := m[k]
		got, gok := x.get(k)
		if ok != gok || (ok && got != n) {
			t.Fatalf("final get(%d) = %d, %v; map %d, %v", k, got, gok, n, ok)
		}
	}
}

// BenchmarkLRUTouch measures the prefix cache alone on the benchmark
// workload's blocks: one lookup pass and one touch pass per request.
func BenchmarkLRUTouch(b *testing.B) {
	w := newBenchWorkload(1<<14, benchRate)
	c := newBlockLRU(defaultKVCacheTokens / defaultBlockTokens)
	blocks := 0
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, cpuOK := threadCPUNs()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := w.reqs[i%len(w.reqs)]
		c.prefixHits(r.Blocks)
		c.touchAll(r.Blocks)
		blocks += len(r.Blocks)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(blocks), "ns/block")
	if cpu1, ok := threadCPUNs(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(blocks), "cpu-ns/block")
	}
}
