package sched

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestApportionKnownAnswers(t *testing.T) {
	tests := []struct {
		name    string
		weights []float64
		slots   int
		want    []int
	}{
		{"exact", []float64{0.5, 0.25, 0.25}, 8, []int{4, 2, 2}},
		{"largest remainder", []float64{0.7, 0.3}, 16, []int{11, 5}},
		{"tie goes to the lower index", []float64{1, 1, 1}, 4, []int{2, 1, 1}},
		{"unnormalised", []float64{7, 3}, 16, []int{11, 5}},
		{"zero weights get nothing", []float64{0, 1, 0}, 16, []int{0, 16, 0}},
		{"tiny weight rounds to zero", []float64{1e-9, 1}, 16, []int{0, 16}},
		{"three-way remainder", []float64{0.45, 0.35, 0.2}, 4, []int{2, 1, 1}},
		{"one slot", []float64{0.4, 0.6}, 1, []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := apportion(tc.weights, tc.slots); !slices.Equal(got, tc.want) {
				t.Errorf("apportion(%v, %d) = %v, want %v", tc.weights, tc.slots, got, tc.want)
			}
		})
	}
}

// Hamilton's method: counts sum to the slots, each is the floor or the
// ceiling of its exact quota, and zero weights get nothing.
func TestApportionProperties(t *testing.T) {
	r := newRand(3)
	for trial := range 200 {
		n := 1 + r.IntN(300)
		ws := randomWeights(r, n)
		for i := range ws {
			if r.IntN(5) == 0 {
				ws[i] = 0
			}
		}
		ws[r.IntN(n)] = 1 // at least one positive
		slots := 1 << (4 + r.IntN(13))
		counts := apportion(ws, slots)
		total, sum := 0.0, 0
		for _, w := range ws {
			total += w
		}
		for i, c := range counts {
			sum += c
			q := ws[i] / total * float64(slots)
			if float64(c) < math.Floor(q) || float64(c) > math.Ceil(q) {
				t.Fatalf("trial %d: engine %d got %d slots for quota %.3f", trial, i, c, q)
			}
			if ws[i] == 0 && c != 0 {
				t.Fatalf("trial %d: engine %d has weight 0 but %d slots", trial, i, c)
			}
		}
		if sum != slots {
			t.Fatalf("trial %d: counts sum to %d, want %d", trial, sum, slots)
		}
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		engines []string
		weights []float64
		slots   int
		want    string
	}{
		{"length mismatch", []string{"a", "b"}, []float64{1}, 16, "2 engines but 1 weights"},
		{"no engines", nil, nil, 16, "0 engines"},
		{"empty name", []string{"a", ""}, []float64{1, 1}, 16, "empty name"},
		{"duplicate", []string{"a", "b", "a"}, []float64{1, 1, 1}, 16, `"a" listed twice`},
		{"NaN", []string{"a"}, []float64{math.NaN()}, 16, "weight NaN"},
		{"Inf", []string{"a"}, []float64{math.Inf(1)}, 16, "weight +Inf"},
		{"negative", []string{"a", "b"}, []float64{1, -0.1}, 16, "weight -0.1"},
		{"all zero", []string{"a", "b"}, []float64{0, 0}, 16, "no engine has a positive weight"},
		{"sum overflows", []string{"a", "b"}, []float64{math.MaxFloat64, math.MaxFloat64}, 16, "not finite"},
		{"slots zero", []string{"a"}, []float64{1}, 0, "slots 0"},
		{"slots not a power of two", []string{"a"}, []float64{1}, 100, "slots 100"},
		{"slots too many", []string{"a"}, []float64{1}, MaxSlots * 2, "power of two from 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Build(tc.engines, tc.weights, tc.slots)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build = %v, %v; want an error containing %q", tab, err, tc.want)
			}
		})
	}
	if _, err := Build(engineNames(MaxEngines+1), make([]float64, MaxEngines+1), DefaultSlots); err == nil {
		t.Error("Build accepted more than MaxEngines engines")
	}
}
