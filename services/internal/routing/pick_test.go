package routing

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/ilb-router/ilb/solver/sched"
)

// shedShare is the share of n keys of one kind that Shed refuses.
func shedShare(f, newShare float64, ongoing bool) float64 {
	const n = 20000
	shed := 0
	for i := range n {
		if Shed(sched.HashKey("k"+strconv.Itoa(i)), f, newShare, ongoing, nil, 0) {
			shed++
		}
	}
	return float64(shed) / n
}

func TestShedNewConversationsFirst(t *testing.T) {
	for _, c := range []struct {
		f, newShare float64
		ongoing     bool
		want        float64
	}{
		{0.3, 0.5, false, 0.6},        // new ones at f/n
		{0.3, 0.5, true, 0},           // ongoing ones untouched while new ones cover f
		{0.2, 0.1, false, 1},          // every new one ...
		{0.2, 0.1, true, 0.1 / 0.9},   // ... and ongoing ones at (f−n)/(1−n)
		{0.2, 0, false, 1},            // no new conversation lately: a new one is shed
		{1e-9, 0, false, 0},           // round-off is no shed fraction
		{1, 0.5, true, 1},             // everything
		{0, 0.5, false, 0},            // nothing
		{math.NaN(), 0.5, false, 0},   // nonsense sheds nothing
		{0.5, math.NaN(), true, 0},    // an unknown mix counts as all new ...
		{0.5, math.NaN(), false, 0.5}, // ... shed at f
	} {
		got := shedShare(c.f, c.newShare, c.ongoing)
		if math.Abs(got-c.want) > 0.02 {
			t.Errorf("f %v new share %v ongoing %v: shed %.3f, want %.3f", c.f, c.newShare, c.ongoing, got, c.want)
		}
	}
}

func TestOver(t *testing.T) {
	// share 0.25 of 11 requests (10 + this one) with spill 1.25: bound ⌈3.4375⌉ = 4.
	if Over(1.25, 0.25, 3, 10) || !Over(1.25, 0.25, 4, 10) {
		t.Error("bound ⌈1.25 × 0.25 × 11⌉ = 4")
	}
	if Over(math.Inf(1), 0.25, 100, 10) {
		t.Error("an infinite spill factor bounds nothing")
	}
	if !Over(1, 0, 0, 0) {
		t.Error("an engine without share is always full")
	}
}

func TestShares(t *testing.T) {
	counts := []int{2, 6, 0, 8}
	usable := func(i int) bool { return i != 3 }
	got := make([]float64, 4)
	Shares(got, counts, usable)
	if !slices.Equal(got, []float64{0.25, 0.75, 0, 0}) {
		t.Errorf("shares %v, want renormalised over usable engines with slots", got)
	}
	EqualShares(got, counts, usable)
	if !slices.Equal(got, []float64{0.5, 0.5, 0, 0}) {
		t.Errorf("equal shares %v", got)
	}
}

func TestChooseStickySpilled(t *testing.T) {
	tb, err := sched.Build([]string{"a", "b", "c"}, []float64{1, 1, 1}, sched.DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	h := sched.HashKey("conversation")
	primary := tb.PickHash(h)
	none := func(int) bool { return false }
	onlyPrimary := func(i int) bool { return i == primary }
	all := func(int) bool { return true }
	if idx, ok := Choose(tb, h, false, none, none); !ok || idx != primary {
		t.Errorf("nothing in the way: %d, want the primary %d", idx, primary)
	}
	idx, ok := Choose(tb, h, false, none, onlyPrimary)
	if !ok || idx == primary {
		t.Errorf("primary full: a new conversation goes to %d", idx)
	}
	if !Spilled(idx, primary, true) || Spilled(idx, primary, false) || Spilled(primary, primary, true) {
		t.Error("a move away from a usable primary is a spill, from an unusable one not")
	}
	if idx, ok := Choose(tb, h, true, none, onlyPrimary); !ok || idx != primary {
		t.Errorf("an ongoing conversation ignores load: %d", idx)
	}
	if idx, ok := Choose(tb, h, false, none, all); !ok || idx != primary {
		t.Errorf("every engine full: load is ignored, got %d", idx)
	}
	if _, ok := Choose(tb, h, false, all, none); ok {
		t.Error("every engine unusable: no choice")
	}
	if !Sticky(primary, idx, primary) || Sticky(primary, primary, primary) || Sticky(primary, idx, idx) {
		t.Error("sticky only when spilled and the table still gives the same primary")
	}
}

// The guardrails run on the request path: no allocation.
func TestPickDoesNotAllocate(t *testing.T) {
	tb, _ := sched.Build([]string{"a", "b", "c"}, []float64{1, 2, 3}, sched.DefaultSlots)
	loads := []int64{5, 1, 0}
	shares := []float64{1.0 / 6, 2.0 / 6, 3.0 / 6}
	var sizes Sizes
	for i := range SizesLen {
		sizes.Observe(100 + i)
	}
	allocs := testing.AllocsPerRun(100, func() {
		h := sched.HashKey("k")
		if Shed(h, 0.1, 0.5, false, &sizes, 150) {
			return
		}
		Choose(tb, h, false, func(i int) bool { return false }, func(i int) bool { return Over(1.25, shares[i], loads[i], 6) })
	})
	if allocs != 0 {
		t.Errorf("%v allocations per pick", allocs)
	}
}
