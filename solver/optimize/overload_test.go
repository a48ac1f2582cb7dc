package optimize

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// overloadedFleet is a random fleet whose demand is load times its load
// cap, with eligibility holes, an engine without capacity, and a cluster
// whose only eligible engine is that one (it can only shed): the corner
// cases of the overloaded cold start (start.go), which prices every
// cluster at the shed penalty when demand is at least the load cap.
func overloadedFleet(t *testing.T, seed uint64, load float64) *Problem {
	t.Helper()
	p := randomFleet(t, newRand(seed), fleetSpec{clusters: 20, engines: 150, load: load, regions: 6, restricted: 0.1})
	punchHoles(p, newRand(seed+100), 0.2)
	p.Engines = slices.Clone(p.Engines)
	p.Engines[0].CapacityRps = 0
	p.Eligible[p.Clusters[0].Name] = []string{p.Engines[0].Name}
	return p
}

// Cold solves of overloaded fleets close their certificate, reach the
// optimum a warm solve reaches from a different start (the solution of
// the same fleet at 60% load, which starts below the penalty), and take
// few Newton steps: from the least entry prices they had climbed toward
// the penalty in hundreds (546 on one of these 30x200 fleets).
func TestOverloadedColdStart(t *testing.T) {
	for _, load := range []float64{1, 1.05, 1.5, 4} {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("load%.2f/%d", load, seed), func(t *testing.T) {
				p := overloadedFleet(t, seed+1, load)
				sol := solveOK(t, p)
				if sol.NewtonSteps > 150 {
					t.Errorf("%d Newton steps", sol.NewtonSteps)
				}
				if sol.ShedFraction[p.Clusters[0].Name] != 1 {
					t.Errorf("cluster without capacity sheds %v, want 1", sol.ShedFraction[p.Clusters[0].Name])
				}
				opt := DefaultOptions()
				opt.Previous = solveOK(t, scaleDemand(p, 0.6/load))
				warm, err := Solve(p, opt)
				if err != nil {
					t.Fatal(err)
				}
				checkFeasible(t, p, warm, 1e-9)
				gap := max(sol.Gap, warm.Gap, 1e-12)
				if d := math.Abs(sol.ObjectiveMs - warm.ObjectiveMs); d > 2*gap*sol.ObjectiveMs {
					t.Errorf("objective %.15g cold, %.15g warm", sol.ObjectiveMs, warm.ObjectiveMs)
				}
				if d := math.Abs(totalShed(p, sol) - totalShed(p, warm)); d > 1e-6*totalShed(p, sol) {
					t.Errorf("total shed %.12g cold, %.12g warm", totalShed(p, sol), totalShed(p, warm))
				}
			})
		}
	}
}

// scaleDemand returns a copy of p with every cluster's demand times f.
func scaleDemand(p *Problem, f float64) *Problem {
	q := *p
	q.Clusters = slices.Clone(p.Clusters)
	for i := range q.Clusters {
		q.Clusters[i].DemandRps *= f
	}
	return &q
}

func totalShed(p *Problem, sol *Solution) float64 {
	s := 0.0
	for _, c := range p.Clusters {
		s += sol.ShedFraction[c.Name] * c.DemandRps
	}
	return s
}
