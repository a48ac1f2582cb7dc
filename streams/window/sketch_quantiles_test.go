package window

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantiles3IsQuantile checks Quantiles3 against three Quantile calls
// bit for bit: empty sketches, zeros, saturated values, qs out of order
// and out of range, sketches reset and refilled with few values, and
// merged ones (where the scan starts: counts[:nz] are 0).
func TestQuantiles3IsQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	qs := [][3]float64{{0.5, 0.9, 0.99}, {0, 0.5, 1}, {0.99, 0.5, 0.9}, {0.9, 0.9, 0.9}, {-1, 0.5, 2}, {math.NaN(), 0.1, 0.2}}
	var reused Sketch
	for trial := range 600 {
		var s Sketch
		if trial%2 == 1 { // a wide store reset and refilled, or merged into
			reused.Reset()
			s = reused
		}
		n := rng.IntN(2000) * min(trial, 1) // the first empty
		if trial%4 == 1 {
			n = rng.IntN(4)
		}
		var part Sketch
		for range n {
			var v float64
			switch rng.IntN(10) {
			case 0:
			case 1:
				v = 1e9
			default:
				v = math.Exp(rng.NormFloat64()*3 + 5)
			}
			if trial%8 == 3 {
				part.Add(v)
				continue
			}
			s.Add(v)
		}
		s.Merge(&part)
		if trial%2 == 1 {
			reused = s
		}
		for _, q := range qs {
			a, b, c := s.Quantiles3(q[0], q[1], q[2])
			got := [3]float64{a, b, c}
			for k := range q {
				if want := s.Quantile(q[k]); math.Float64bits(got[k]) != math.Float64bits(want) {
					t.Fatalf("trial %d, n=%d: Quantiles3(%v)[%d] = %v, Quantile = %v", trial, s.n, q, k, got[k], want)
				}
			}
		}
	}
}

// TestSketchValuesArePow checks the table against the formula it caches.
func TestSketchValuesArePow(t *testing.T) {
	for b, v := range sketchValues {
		if want := 2 * math.Pow(sketchGamma, float64(b+sketchMinIndex)) / (sketchGamma + 1); math.Float64bits(v) != math.Float64bits(want) {
			t.Fatalf("bucket %d: %v, want %v", b, v, want)
		}
	}
}
