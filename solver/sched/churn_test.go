package sched

import (
	"math"
	"testing"
)

func TestTotalVariation(t *testing.T) {
	tests := []struct {
		name string
		a, b map[string]float64
		want float64
	}{
		{"same", map[string]float64{"a": 0.7, "b": 0.3}, map[string]float64{"a": 0.7, "b": 0.3}, 0},
		{"shift", map[string]float64{"a": 0.7, "b": 0.3}, map[string]float64{"a": 0.5, "b": 0.5}, 0.2},
		{"engine added", map[string]float64{"a": 0.7, "b": 0.3}, map[string]float64{"a": 0.5, "b": 0.3, "c": 0.2}, 0.2},
		{"disjoint", map[string]float64{"a": 1}, map[string]float64{"b": 1}, 1},
		{"shed, not normalised", map[string]float64{"a": 0.5, "b": 0.5}, map[string]float64{"a": 0.4, "b": 0.4}, 0.1},
		{"empty", nil, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TotalVariation(tc.a, tc.b); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("TotalVariation = %v, want %v", got, tc.want)
			}
			if TotalVariation(tc.a, tc.b) != TotalVariation(tc.b, tc.a) {
				t.Error("not symmetric")
			}
		})
	}
}

// MovedShare must agree with what keys actually do, also across table
// sizes.
func TestMovedShare(t *testing.T) {
	a, err := Build([]string{"a", "b", "c"}, []float64{1, 1, 2}, 16)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build([]string{"b", "c", "d"}, []float64{1, 1, 1}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := MovedShare(a, a); got != 0 {
		t.Errorf("MovedShare(a, a) = %v", got)
	}
	r := newRand(16)
	const n = 200_000
	moved := 0
	for range n {
		h := r.Uint64()
		if a.Engine(a.PickHash(h)) != b.Engine(b.PickHash(h)) {
			moved++
		}
	}
	got, want := MovedShare(a, b), float64(moved)/n
	if math.Abs(got-want) > 0.005 || MovedShare(b, a) != got {
		t.Errorf("MovedShare = %v (reversed %v), keys say %v", got, MovedShare(b, a), want)
	}
	var zero Table
	if MovedShare(&zero, a) != 1 || MovedShare(&zero, &zero) != 0 {
		t.Error("MovedShare with the zero table")
	}
}
