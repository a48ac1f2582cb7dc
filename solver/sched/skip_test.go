package sched

import (
	"math"
	"testing"
)

func TestPickSkipKeepsAvailableEngines(t *testing.T) {
	tab, err := Build(engineNames(20), randomWeights(newRand(4), 20), DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	r := newRand(5)
	for range 10_000 {
		h := r.Uint64()
		if got, ok := tab.PickSkip(h, func(int) bool { return false }); !ok || got != tab.PickHash(h) {
			t.Fatalf("hash %#x: PickSkip with nothing skipped = %d, %v; Pick = %d", h, got, ok, tab.PickHash(h))
		}
	}
}

// Whatever is skipped, PickSkip never returns a skipped engine or one
// without slots, fails only when every engine with slots is skipped, and
// calls skip a bounded number of times.
func TestPickSkipNeverReturnsSkipped(t *testing.T) {
	r := newRand(6)
	names := engineNames(30)
	ws := randomWeights(r, 30)
	ws[3], ws[17] = 0, 0
	tab, err := Build(names, ws, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for trial := range 2000 {
		down := make([]bool, 30)
		p := []float64{0.1, 0.5, 0.9, 1}[trial%4]
		allDown := true
		for i := range down {
			down[i] = r.Float64() < p
			allDown = allDown && (down[i] || tab.counts[i] == 0)
		}
		calls := 0
		h := r.Uint64()
		got, ok := tab.PickSkip(h, func(e int) bool { calls++; return down[e] })
		if calls > 1+MaxProbes+tab.Len() {
			t.Fatalf("trial %d: skip called %d times, bound %d", trial, calls, 1+MaxProbes+tab.Len())
		}
		if ok == allDown {
			t.Fatalf("trial %d: ok = %v with every engine down = %v", trial, ok, allDown)
		}
		if ok && (down[got] || tab.counts[got] == 0) {
			t.Fatalf("trial %d: picked engine %d (down %v, %d slots)", trial, got, down[got], tab.counts[got])
		}
	}
}

// Keys of a skipped engine spread over the others in proportion to their
// weights, because the probes land on slots; other keys stay put.
func TestPickSkipSpreadsByWeight(t *testing.T) {
	tab, err := Build([]string{"a", "b", "c", "d"}, []float64{4, 3, 2, 1}, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	skipA := func(e int) bool { return e == 0 }
	r := newRand(12)
	var got [4]int
	displaced := 0
	for range 200_000 {
		h := r.Uint64()
		e, ok := tab.PickSkip(h, skipA)
		if !ok {
			t.Fatal("no engine found with three available")
		}
		if primary := tab.PickHash(h); primary != 0 {
			if e != primary {
				t.Fatalf("key of available engine %d moved to %d", primary, e)
			}
			continue
		}
		displaced++
		got[e]++
	}
	for e, want := range []float64{0, 0.5, 1.0 / 3, 1.0 / 6} {
		share := float64(got[e]) / float64(displaced)
		if tol := 5 * math.Sqrt(want*(1-want)/float64(displaced)); math.Abs(share-want) > tol {
			t.Errorf("engine %d took %.4f of the displaced keys, want %.4f ± %.4f", e, share, want, tol)
		}
	}
}

// When the probes cannot find an available engine (here: the only one left
// owns a single slot), the rendezvous fallback still does.
func TestPickSkipFallsBackToRanking(t *testing.T) {
	tab, err := Build([]string{"big", "small", "zero"}, []float64{65535, 1, 0}, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	if tab.counts[1] != 1 {
		t.Fatalf("small owns %d slots, want 1", tab.counts[1])
	}
	r := newRand(13)
	for range 1000 {
		if e, ok := tab.PickSkip(r.Uint64(), func(e int) bool { return e == 0 }); !ok || e != 1 {
			t.Fatalf("PickSkip = %d, %v; want small (1)", e, ok)
		}
	}
	// The ranking itself is a rendezvous order: with several candidates,
	// each wins for a fair share of keys.
	eq, err := Build([]string{"a", "b", "c"}, []float64{1, 1, 1}, 16)
	if err != nil {
		t.Fatal(err)
	}
	var wins [3]int
	for range 30_000 {
		e, ok := eq.rank(r.Uint64(), func(int) bool { return false })
		if !ok {
			t.Fatal("rank found nothing")
		}
		wins[e]++
	}
	for e, w := range wins {
		if w < 9_500 || w > 10_500 {
			t.Errorf("rank chose engine %d for %d of 30000 keys, want about 10000", e, w)
		}
	}
}

// Replicas holding the same encoded table and the same view of which
// engines are down send every key to the same engine.
func TestPickSkipReplicasAgree(t *testing.T) {
	src, err := Build(engineNames(100), randomWeights(newRand(14), 100), DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Decode(src.Encode())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(src.Encode())
	if err != nil {
		t.Fatal(err)
	}
	down := func(e int) bool { return e%3 == 0 || e < 60 }
	for _, k := range convKeys(20_000) {
		h := HashKey(k)
		ea, oka := a.PickSkip(h, down)
		eb, okb := b.PickSkip(h, down)
		if ea != eb || oka != okb {
			t.Fatalf("key %s: replica a picks %d, replica b %d", k, ea, eb)
		}
	}
}
