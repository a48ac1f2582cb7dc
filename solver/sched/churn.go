package sched

import (
	"math"
	"slices"
)

// TotalVariation returns ½·Σ|a[e] − b[e]| over the engines of either map,
// a missing engine counting as 0: the share of traffic that must move when
// weights change from a to b (the backtester's weight_churn). Weights are
// taken as given, not normalised. The sum runs in name order, so the
// result does not depend on map iteration order.
func TotalVariation(a, b map[string]float64) float64 {
	names := make([]string, 0, len(a)+len(b))
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	sum := 0.0
	for _, n := range names {
		sum += math.Abs(a[n] - b[n])
	}
	return sum / 2
}

// MovedShare returns the share of the key space that picks a different
// engine (compared by name) in b than in a. Tables of different sizes are
// compared slot by slot on the larger size, which is exact because a key's
// slot in the smaller table is its slot in the larger one masked down.
// For b = a.Update(...) it equals the moved slots over the slot count.
// An empty (zero) table differs everywhere from a non-empty one.
func MovedShare(a, b *Table) float64 {
	n := max(a.n, b.n)
	switch {
	case n == 0:
		return 0
	case a.n == 0 || b.n == 0:
		return 1
	}
	toB := make([]int, len(a.names))
	for i, name := range a.names {
		toB[i] = -1
		if j, ok := b.Index(name); ok {
			toB[i] = j
		}
	}
	moved := 0
	for s := range n {
		if toB[a.PickHash(uint64(s))] != b.PickHash(uint64(s)) {
			moved++
		}
	}
	return float64(moved) / float64(n)
}
