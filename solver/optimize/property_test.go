package optimize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// smallFleets are random fleets with real inter-region RTTs, small enough
// to solve many of them in a test.
func smallFleets(t *testing.T, n int) []*Problem {
	t.Helper()
	var out []*Problem
	for seed := range uint64(n) {
		rng := newRand(seed + 1)
		out = append(out, randomFleet(t, rng, fleetSpec{
			clusters: 2 + rng.IntN(8), engines: 3 + rng.IntN(30),
			load:    0.3 + 0.9*rng.Float64(), // some fleets are short and must shed
			regions: 2 + rng.IntN(6), restricted: 0.3,
		}))
	}
	return out
}

func TestSolveRandomFleetsAreFeasibleAndCertified(t *testing.T) {
	for i, p := range smallFleets(t, 40) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			sol, err := Solve(p, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			checkFeasible(t, p, sol, 1e-9)
			if sol.Gap > DefaultOptions().Tolerance {
				t.Errorf("gap %v above the tolerance", sol.Gap)
			}
			if sol.KKTResidualMs > 1e-6*sol.ObjectiveMs {
				t.Errorf("KKT residual %v ms", sol.KKTResidualMs)
			}
		})
	}
}

func TestMoreCapacityNeverRaisesTheObjective(t *testing.T) {
	for i, p := range smallFleets(t, 25) {
		base, err := Solve(p, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		rng := newRand(uint64(100 + i))
		q := *p
		q.Engines = append([]Engine(nil), p.Engines...)
		e := rng.IntN(len(q.Engines))
		q.Engines[e].CapacityRps *= 1 + rng.Float64()
		more, err := Solve(&q, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		// Both are optimal to within their gaps.
		if more.ObjectiveMs > base.ObjectiveMs*(1+base.Gap+more.Gap+1e-12) {
			t.Errorf("fleet %d: engine %s capacity up, objective %v -> %v", i, q.Engines[e].Name, base.ObjectiveMs, more.ObjectiveMs)
		}
	}
}

func TestMoreDemandNeverLowersTheMarginalCost(t *testing.T) {
	for i, p := range smallFleets(t, 15) {
		base, err := Solve(p, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		q := perturbDemand(p, newRand(uint64(i)), 0)
		q.Clusters[0].DemandRps *= 1.5
		more, err := Solve(q, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		c := p.Clusters[0].Name
		if more.ClusterPriceMs[c] < base.ClusterPriceMs[c]-1e-6*base.ClusterPriceMs[c] {
			t.Errorf("fleet %d: demand of %s up by half, its price %v -> %v", i, c, base.ClusterPriceMs[c], more.ClusterPriceMs[c])
		}
	}
}

func TestSolveIsDeterministic(t *testing.T) {
	p := randomFleet(t, newRand(42), fleetSpec{clusters: 30, engines: 200, load: 0.7, regions: 10, restricted: 0.2})
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for i := range 3 {
		// Parse afresh each time: maps are rebuilt and iterate in a new order.
		q, err := ParseProblem(data)
		if err != nil {
			t.Fatal(err)
		}
		sol, err := Solve(q, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(sol)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = out
		} else if !bytes.Equal(out, first) {
			t.Fatalf("solve %d differs from the first", i)
		}
	}
}
