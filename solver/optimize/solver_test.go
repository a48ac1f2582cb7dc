package optimize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sameAsSolve solves q with the package's Solve and with s.Resolve and
// fails unless the two solutions (or errors) are identical, byte for byte
// in JSON; it returns Solve's solution.
func sameAsSolve(t *testing.T, what string, s *Solver, q *Problem, opt Options) *Solution {
	t.Helper()
	want, errWant := Solve(q, opt)
	got, errGot := s.Resolve(q, opt)
	if fmt.Sprint(errWant) != fmt.Sprint(errGot) {
		t.Fatalf("%s: Resolve's error %v, Solve's %v", what, errGot, errWant)
	}
	if errWant != nil {
		return nil
	}
	if want == nil {
		t.Fatalf("%s: no solution", what)
	}
	a, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s: Resolve's solution differs from Solve's:\n%s\n%s", what, b, a)
	}
	return want
}

// resolveSteps re-solves p after a sequence of changes a running optimizer
// sees (demand moves, engine profiles and capacities refitted, a churn
// solve from an anchor without engine prices, shedding switched on by a
// demand surge), checking every solve against Solve.
func resolveSteps(t *testing.T, name string, p *Problem, rng *rand.Rand) {
	var s Solver
	prev := sameAsSolve(t, name+" cold", &s, p, DefaultOptions())
	kept := s.m
	q := p
	for step := range 5 {
		q = perturbDemand(q, rng, 0.05)
		opt := DefaultOptions()
		opt.Previous = prev
		switch step {
		case 1: // refitted profiles and derated capacities
			q.Engines = append([]Engine(nil), q.Engines...)
			for i := range q.Engines {
				if rng.IntN(4) == 0 {
					q.Engines[i].CapacityRps *= 0.8 + 0.4*rng.Float64()
					q.Engines[i].TTFT.QueueMs *= 0.9 + 0.2*rng.Float64()
				}
			}
			q.MeanOutputTokens *= 1.1
		case 2: // the services' churn solve from the published anchor
			opt.ChurnMs, opt.Tolerance = 500, 1e-6
			opt.Previous = &Solution{Weights: prev.Weights, ShedFraction: prev.ShedFraction,
				ClusterPriceMs: prev.ClusterPriceMs}
		case 3: // a surge: demand 40% up, shedding active; automatic penalty
			for i := range q.Clusters {
				q.Clusters[i].DemandRps *= 1.4
			}
			q.ShedPenaltyMs = 0
		case 4: // an idle cluster
			q.Clusters[0].DemandRps = 0
		}
		prev = sameAsSolve(t, fmt.Sprintf("%s step %d", name, step), &s, q, opt)
		if prev == nil {
			t.Fatalf("%s step %d: no solution", name, step)
		}
		if s.m != kept {
			t.Fatalf("%s step %d: the model was built again", name, step)
		}
	}
}

// TestSolverIsSolve: Resolve gives Solve's solution bit for bit on the
// 100x1000 benchmark fleets (slack, overloaded, eligibility holes, both;
// 30x200 in short mode and under the race detector, where 100x1000 takes
// a minute and a half) and on random fleets, through demand, profile,
// capacity and churn changes, with shedding active and idle clusters.
func TestSolverIsSolve(t *testing.T) {
	regimes := []regime{regimeSlack, regimeOverloaded, regimeEligible, regimeBoth}
	size := [2]int{100, 1000}
	if testing.Short() || raceEnabled {
		size = [2]int{30, 200}
	}
	for i, r := range regimes {
		resolveSteps(t, r.name, regimeFleet(t, r, size[0], size[1]), newRand(uint64(i)))
	}
	for i := range 12 {
		rng := newRand(uint64(100 + i))
		spec := fleetSpec{clusters: 5 + rng.IntN(25), engines: 20 + rng.IntN(100),
			load: []float64{0.5, 0.9, 1.1}[i%3], regions: 5 + rng.IntN(10), restricted: 0.3}
		p := randomFleet(t, rng, spec)
		if i%2 == 0 {
			punchHoles(p, rng, 0.3)
		}
		resolveSteps(t, fmt.Sprintf("fleet %d", i), p, rng)
	}
}

// TestSolverShapeChanges: when the engines change (one leaves, one loses
// all its capacity, one comes back) Resolve builds the model afresh, and
// the solutions stay Solve's; an invalid problem gets Solve's error and
// leaves the Solver usable.
func TestSolverShapeChanges(t *testing.T) {
	rng := newRand(5)
	p := randomFleet(t, rng, fleetSpec{clusters: 12, engines: 60, load: 0.9, regions: 6, restricted: 0.3})
	punchHoles(p, rng, 0.3)
	var s Solver
	prev := sameAsSolve(t, "cold", &s, p, DefaultOptions())
	opt := DefaultOptions()
	models := map[*model]bool{s.m: true}
	rebuilt := func(what string, want bool) {
		t.Helper()
		if models[s.m] == want {
			t.Fatalf("%s: model built again %v, want %v", what, !want, want)
		}
		models[s.m] = true
	}

	gone := withoutEngine(p, 3) // engine 3 leaves the problem
	opt.Previous = prev
	prev = sameAsSolve(t, "engine gone", &s, gone, opt)
	rebuilt("engine gone", true)

	dead := *p // back, but without capacity: its routes leave the model
	dead.Engines = append([]Engine(nil), p.Engines...)
	dead.Engines[3].CapacityRps = 0
	opt.Previous = prev
	prev = sameAsSolve(t, "engine without capacity", &s, &dead, opt)
	rebuilt("engine without capacity", true)

	bad := perturbDemand(p, rng, 0.05)
	bad.Clusters[2].DemandRps = -1
	if sameAsSolve(t, "negative demand", &s, bad, opt) != nil {
		t.Fatal("negative demand solved")
	}
	bad.Clusters[2].DemandRps = 1
	bad.MaxUtilization = 1
	if sameAsSolve(t, "max_utilization 1", &s, bad, opt) != nil {
		t.Fatal("max_utilization 1 solved")
	}
	rebuilt("invalid problems", false)

	opt.Previous = prev
	back := perturbDemand(p, rng, 0.05) // capacity again
	prev = sameAsSolve(t, "engine back", &s, back, opt)
	rebuilt("engine back", true)
	opt.Previous = prev
	sameAsSolve(t, "demand moved", &s, perturbDemand(back, rng, 0.05), opt)
	rebuilt("demand moved", false)
	bogus := opt
	bogus.Tolerance = 2
	if sameAsSolve(t, "bad options", &s, back, bogus) != nil {
		t.Fatal("tolerance 2 solved")
	}
}

// withoutEngine is p without engine i, in its engines, network and
// eligibility lists.
func withoutEngine(p *Problem, i int) *Problem {
	q := *p
	name := p.Engines[i].Name
	q.Engines = append(append([]Engine(nil), p.Engines[:i]...), p.Engines[i+1:]...)
	q.NetworkMs = map[string]map[string]float64{}
	for c, row := range p.NetworkMs {
		q.NetworkMs[c] = map[string]float64{}
		for e, v := range row {
			if e != name {
				q.NetworkMs[c][e] = v
			}
		}
	}
	q.Eligible = map[string][]string{}
	for c, list := range p.Eligible {
		q.Eligible[c] = slices.DeleteFunc(slices.Clone(list), func(e string) bool { return e == name })
	}
	return &q
}
