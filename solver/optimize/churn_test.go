package optimize

import (
	"testing"
)

// churnFleet is a fleet solved once, and the same fleet a moment later with
// every cluster's demand moved by up to 5%.
func churnFleet(t *testing.T) (before *Solution, after *Problem) {
	t.Helper()
	p := randomFleet(t, newRand(5), fleetSpec{clusters: 12, engines: 60, load: 0.7, regions: 6, restricted: 0.2})
	sol, err := Solve(p, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return sol, perturbDemand(p, newRand(6), 0.05)
}

func TestWarmStartWithoutChurnFindsTheOptimum(t *testing.T) {
	prev, q := churnFleet(t)
	cold, err := Solve(q, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultOptions()
	opt.Previous = prev
	warm, err := Solve(q, opt)
	if err != nil {
		t.Fatal(err)
	}
	checkFeasible(t, q, warm, 1e-9)
	near(t, "warm objective", warm.ObjectiveMs, cold.ObjectiveMs, 1e-9)
	if warm.Gap > opt.Tolerance || warm.ChurnCostMs != 0 {
		t.Errorf("warm gap %v churn cost %v", warm.Gap, warm.ChurnCostMs)
	}
	if warm.WeightChurn <= 0 {
		t.Errorf("weight churn %v after a demand change", warm.WeightChurn)
	}
}

func TestChurnPriceDampsMoves(t *testing.T) {
	prev, q := churnFleet(t)
	exact := DefaultOptions()
	exact.Previous = prev
	free, err := Solve(q, exact)
	if err != nil {
		t.Fatal(err)
	}
	last := free.WeightChurn
	for _, churn := range []float64{10, 100, 1000} {
		opt := exact
		opt.ChurnMs = churn
		damped, err := Solve(q, opt)
		if err != nil {
			t.Fatal(err)
		}
		checkFeasible(t, q, damped, 1e-9)
		if damped.Gap > 1e-9 {
			t.Errorf("churn %v: gap %v", churn, damped.Gap)
		}
		// A higher price moves less, and pays for it in latency.
		if damped.WeightChurn >= last {
			t.Errorf("churn %v ms: weight churn %v, not below %v", churn, damped.WeightChurn, last)
		}
		if damped.ObjectiveMs < free.ObjectiveMs*(1-1e-9) {
			t.Errorf("churn %v ms: latency %v below the optimum %v", churn, damped.ObjectiveMs, free.ObjectiveMs)
		}
		last = damped.WeightChurn
	}
}

// TestRepeatedChurnSolvesReachTheOptimum feeds each solution back as the
// next one's previous solution: that is the proximal point method, so on a
// steady fleet the latency falls every solve and converges to the optimum.
func TestRepeatedChurnSolvesReachTheOptimum(t *testing.T) {
	prev, q := churnFleet(t)
	best, err := Solve(q, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultOptions()
	opt.ChurnMs = 200
	last := prev
	lastObj := 0.0
	for i := range 40 {
		opt.Previous = last
		sol, err := Solve(q, opt)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && sol.ObjectiveMs > lastObj*(1+1e-12) {
			t.Fatalf("solve %d: latency rose %v -> %v", i, lastObj, sol.ObjectiveMs)
		}
		last, lastObj = sol, sol.ObjectiveMs
	}
	if lastObj > best.ObjectiveMs*(1+1e-6) {
		t.Errorf("after 40 solves %v, optimum %v", lastObj, best.ObjectiveMs)
	}
}
