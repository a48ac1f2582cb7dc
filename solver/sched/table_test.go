package sched

import (
	"math"
	"slices"
	"testing"
)

func TestBuildLayoutKnownAnswer(t *testing.T) {
	tab, err := Build([]string{"c", "a", "b"}, []float64{1, 2, 1}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint16{0, 0, 0, 0, 1, 1, 2, 2}; !slices.Equal(tab.slots, want) {
		t.Errorf("slots = %v, want %v", tab.slots, want)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(tab.Engines(), want) {
		t.Errorf("Engines() = %v, want %v", tab.Engines(), want)
	}
	if got, want := tab.Weights(), []float64{0.5, 0.25, 0.25}; !slices.Equal(got, want) {
		t.Errorf("Weights() = %v, want %v", got, want)
	}
}

// Build depends only on the set of (name, weight) pairs: the order given
// (a Go map's, say) must not matter, and two builds are bit-identical.
func TestBuildDeterministic(t *testing.T) {
	r := newRand(5)
	names, ws := engineNames(500), randomWeights(r, 500)
	a, err := Build(names, ws, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	perm := r.Perm(len(names))
	pn, pw := make([]string, len(names)), make([]float64, len(names))
	for i, j := range perm {
		pn[i], pw[i] = names[j], ws[j]
	}
	b, err := Build(pn, pw, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Equal(b) {
		t.Fatal("Build of the same engines in another order gave a different table")
	}
	_, _, _, da := a.Encode()
	_, _, _, db := b.Encode()
	if !slices.Equal(da, db) {
		t.Fatal("encodings of equal builds differ")
	}
}

// Picks follow the weights: slot counts are the apportionment, and the
// share of random keys each engine serves matches its slot share.
func TestPicksFollowWeights(t *testing.T) {
	names := []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9"}
	ws := []float64{0.30, 0.20, 0.15, 0.10, 0.08, 0.07, 0.05, 0.03, 0.02, 0}
	tab, err := Build(names, ws, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	if want := apportion(ws, DefaultSlots); !slices.Equal(tab.Counts(), want) {
		t.Fatalf("Counts() = %v, want the apportionment %v", tab.Counts(), want)
	}
	const n = 100_000
	r := newRand(11)
	picks := make([]int, len(names))
	for range n {
		picks[tab.PickHash(r.Uint64())]++
	}
	for i, w := range tab.Weights() {
		got, sd := float64(picks[i])/n, math.Sqrt(w*(1-w)/n)
		if math.Abs(got-w) > 5*sd {
			t.Errorf("%s: picked for %.4f of keys, weight %.4f (tolerance %.4f)", names[i], got, w, 5*sd)
		}
	}
	if picks[9] != 0 {
		t.Errorf("engine of weight 0 picked %d times", picks[9])
	}
}

// An engine with weight 0 owns no slot, so no key can reach it, before or
// after updates. Checking every slot covers every possible key.
func TestZeroWeightNeverPicked(t *testing.T) {
	r := newRand(9)
	names := engineNames(50)
	ws := randomWeights(r, 50)
	for i := 0; i < 50; i += 5 {
		ws[i] = 0
	}
	tab, err := Build(names, ws, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 20 {
		for s, e := range tab.slots {
			if ws[e] == 0 {
				t.Fatalf("step %d: slot %d belongs to %s of weight 0", step, s, names[e])
			}
		}
		ws = randomWeights(r, 50)
		for i := range ws {
			if r.IntN(4) == 0 {
				ws[i] = 0
			}
		}
		ws[step] = 1
		if tab, err = tab.Update(names, ws); err != nil {
			t.Fatal(err)
		}
	}
}

func TestZeroTable(t *testing.T) {
	var tab Table
	if got := tab.Pick("conv-1"); got != -1 {
		t.Errorf("zero Table Pick = %d, want -1", got)
	}
	if got, ok := tab.PickSkip(1, func(int) bool { return false }); ok || got != -1 {
		t.Errorf("zero Table PickSkip = %d, %v; want -1, false", got, ok)
	}
	if _, err := tab.Update([]string{"a"}, []float64{1}); err == nil {
		t.Error("zero Table Update succeeded, want an error")
	}
	if got := tab.Engine(0); got != "" {
		t.Errorf("zero Table Engine(0) = %q", got)
	}
}

func TestAccessors(t *testing.T) {
	tab, err := Build([]string{"b", "a"}, []float64{1, 3}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 2 || tab.Slots() != 4 {
		t.Errorf("Len, Slots = %d, %d; want 2, 4", tab.Len(), tab.Slots())
	}
	if i, ok := tab.Index("b"); !ok || i != 1 || tab.Engine(i) != "b" {
		t.Errorf("Index(b) = %d, %v", i, ok)
	}
	if _, ok := tab.Index("zz"); ok {
		t.Error("Index found an unknown engine")
	}
	if tab.Engine(-1) != "" || tab.Engine(2) != "" {
		t.Error("Engine out of range returned a name")
	}
	// The slices returned are copies: changing them leaves the table alone.
	tab.Engines()[0] = "x"
	tab.Counts()[0] = 99
	if tab.Engine(0) != "a" || tab.Counts()[0] != 3 {
		t.Error("mutating returned slices changed the table")
	}
}

// TestBuildLaysOutRuns checks Build's direct layout against the slot
// array it describes, read back run by run (newTable): the same runs,
// counts, seeds and slots, for engine counts and sizes with zero weights.
func TestBuildLaysOutRuns(t *testing.T) {
	r := newRand(5)
	for range 50 {
		n := 1 + r.IntN(300)
		names, ws := engineNames(n), randomWeights(r, n)
		for i := range ws {
			if r.Float64() < 0.2 {
				ws[i] = 0
			}
		}
		ws[r.IntN(n)] = 1
		slots := 1 << r.IntN(17)
		got, err := Build(names, ws, slots)
		if err != nil {
			t.Fatal(err)
		}
		want := newTable(got.names, slices.Clone(got.slots))
		if !got.Equal(want) || !slices.Equal(got.spans, want.spans) || !slices.Equal(got.counts, want.counts) ||
			!slices.Equal(got.seeds, want.seeds) {
			t.Fatalf("%d engines, %d slots: Build's runs are not its slots'", n, slots)
		}
	}
}
