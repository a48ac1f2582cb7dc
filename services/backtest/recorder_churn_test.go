package backtest

import (
	"math/rand/v2"
	"testing"

	"github.com/ilb-router/ilb/solver/sched"
)

// TestWeightUpdateIsTotalVariation checks that weightUpdate adds exactly
// sched.TotalVariation of the weights as maps by engine name.
func TestWeightUpdateIsTotalVariation(t *testing.T) {
	names := []string{"west-1", "east-0", "eu-2", "east-10", "a", "west-0"}
	r := &recorder{fi: &fleetInfo{engines: names}}
	rng := rand.New(rand.NewPCG(1, 2))
	weights := func() []float64 {
		w := make([]float64, len(names))
		for e := range w {
			if rng.IntN(3) > 0 {
				w[e] = rng.Float64()
			}
		}
		return w
	}
	asMap := func(w []float64) map[string]float64 {
		m := map[string]float64{}
		for e, v := range w {
			if v != 0 {
				m[names[e]] = v
			}
		}
		return m
	}
	for range 1000 {
		a, b := weights(), weights()
		r.churnSum = 0
		r.weightUpdate(a, b)
		if want := sched.TotalVariation(asMap(a), asMap(b)); r.churnSum != want {
			t.Fatalf("weightUpdate(%v, %v) = %v, want %v", a, b, r.churnSum, want)
		}
	}
}
