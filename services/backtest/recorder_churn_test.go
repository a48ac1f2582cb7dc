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
		r.weightUpdate(a, b, 0)
		if want := sched.TotalVariation(asMap(a), asMap(b)); r.churnSum != want {
			t.Fatalf("weightUpdate(%v, %v) = %v, want %v", a, b, r.churnSum, want)
		}
	}
}

// TestWeightMovedCountsTheArrivalSpan: weight_moved_per_minute counts the
// updates made while requests arrive (up to the last arrival), not those
// made while the engines drain, which re-point no request.
func TestWeightMovedCountsTheArrivalSpan(t *testing.T) {
	r := &recorder{fi: &fleetInfo{engines: []string{"a", "b"}}, lastArrival: 100}
	r.weightUpdate([]float64{1, 0}, []float64{0.5, 0.5}, 100)
	r.weightUpdate([]float64{0.5, 0.5}, []float64{0, 1}, 101)
	if r.churnSum != 1 || r.churnN != 2 {
		t.Errorf("churn sum %v over %d updates, want 1 over 2", r.churnSum, r.churnN)
	}
	if r.movedInSpan != 0.5 {
		t.Errorf("moved while requests arrive %v, want 0.5 (the update after the last arrival left out)", r.movedInSpan)
	}
}
