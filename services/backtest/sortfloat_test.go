package backtest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortFloatsIsSort checks sortFloats against slices.Sort bit for bit,
// on latencies and on the values the radix sort leaves to slices.Sort.
func TestSortFloatsIsSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := map[string]func() float64{
		"ms":       func() float64 { return math.Round(rng.ExpFloat64()*2e9) / 1e6 },
		"repeats":  func() float64 { return float64(rng.IntN(7)) * 0.5 },
		"wide":     func() float64 { return math.Ldexp(rng.Float64(), rng.IntN(200)-100) },
		"inf":      func() float64 { return []float64{math.Inf(1), 0, 1, 2.5}[rng.IntN(4)] },
		"negative": func() float64 { return rng.NormFloat64() },
		"nan":      func() float64 { return []float64{math.NaN(), 1, 0, 3}[rng.IntN(4)] },
		"zeros":    func() float64 { return []float64{math.Copysign(0, -1), 0, 1}[rng.IntN(3)] },
	}
	for name, g := range gen {
		for _, n := range []int{0, 1, 5, radixMin - 1, radixMin, 3658, 10000} {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = g()
			}
			want := slices.Clone(xs)
			slices.Sort(want)
			sortFloats(xs)
			for i := range xs {
				if math.Float64bits(xs[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%s, n=%d: [%d] = %v, slices.Sort has %v", name, n, i, xs[i], want[i])
				}
			}
		}
	}
}

func BenchmarkSortFloats(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, 3658)
	for i := range xs {
		xs[i] = math.Round(rng.ExpFloat64()*2e9) / 1e6
	}
	buf := make([]float64, len(xs))
	b.Run("radix", func(b *testing.B) {
		for range b.N {
			copy(buf, xs)
			sortFloats(buf)
		}
	})
	b.Run("slices", func(b *testing.B) {
		for range b.N {
			copy(buf, xs)
			slices.Sort(buf)
		}
	})
}
