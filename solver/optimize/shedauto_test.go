package optimize

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAutoPenaltyShedsOnlyTheExcess: with the automatic shed penalty a
// problem whose demand the engines can take within their caps sheds
// nothing, however heavy the queueing terms, and one with more demand
// sheds exactly the excess. Two clusters share one engine and each has
// one of its own; cluster b may not use a's own engine, so the largest
// load served is min(Da, ua + us) + min(Db, ub + us − max(0, Da − ua)).
func TestAutoPenaltyShedsOnlyTheExcess(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 200 {
		caps := [3]float64{1 + 9*rng.Float64(), 1 + 9*rng.Float64(), 1 + 9*rng.Float64()} // a's, b's, shared
		const maxU = 0.9
		u := [3]float64{caps[0] * maxU, caps[1] * maxU, caps[2] * maxU}
		load := 0.3 + 1.0*rng.Float64() // total demand over total cap
		split := 0.2 + 0.6*rng.Float64()
		total := load * (u[0] + u[1] + u[2])
		da, db := total*split, total*(1-split)
		var engines []Engine
		for i, name := range []string{"ea", "eb", "es"} {
			engines = append(engines, Engine{Name: name, CapacityRps: caps[i],
				TTFT: TTFT{BaseMs: 100 + 2000*rng.Float64(), QueueMs: 20000 * rng.Float64()},
				TBOT: TBOT{BaseMs: 20 + 30*rng.Float64(), SlopeMs: 300 * rng.Float64()}})
		}
		p := &Problem{MeanOutputTokens: 400, MaxUtilization: maxU,
			Clusters: []Cluster{{Name: "a", DemandRps: da}, {Name: "b", DemandRps: db}},
			Engines:  engines,
			NetworkMs: map[string]map[string]float64{
				"a": {"ea": 1, "es": 150},
				"b": {"eb": 1, "es": 80},
			}}
		sol, err := Solve(p, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		aServed := min(da, u[0]+u[2])
		bServed := min(db, u[1]+u[2]-max(0, aServed-u[0]))
		// b may also take shared capacity first, a then uses its own:
		bFirst := min(db, u[1]+u[2])
		aSecond := min(da, u[0]+u[2]-max(0, bFirst-u[1]))
		maxServed := max(aServed+bServed, aSecond+bFirst)
		shed := sol.ShedFraction["a"]*da + sol.ShedFraction["b"]*db
		want := total - maxServed
		if math.Abs(shed-want) > 1e-6*total+1e-9 {
			t.Errorf("trial %d (load %.2f): shed %.6f rps, want %.6f (the excess)", trial, load, shed, want)
		}
		checkFeasible(t, p, sol, 1e-6)
	}
}

// TestAutoPenaltyIsNamed: an explicit penalty is kept; 0 is replaced by
// one above every marginal cost at the caps.
func TestAutoPenaltyIsNamed(t *testing.T) {
	p := &Problem{MeanOutputTokens: 200, MaxUtilization: 0.95,
		Clusters:  []Cluster{{Name: "a", DemandRps: 1}},
		Engines:   []Engine{{Name: "e", CapacityRps: 2, TTFT: TTFT{BaseMs: 500, QueueMs: 3000}, TBOT: TBOT{BaseMs: 30, SlopeMs: 100}}},
		NetworkMs: map[string]map[string]float64{"a": {"e": 40}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	m := newModel(p)
	f := newEngineCost(p.Engines[0], 200, 0.95)
	if want := 2*(f.d1u+40) + 1; m.penalty != want || !(m.penalty > f.d1u) {
		t.Errorf("auto penalty %v, want %v", m.penalty, want)
	}
	p.ShedPenaltyMs = 1234
	if m := newModel(p); m.penalty != 1234 {
		t.Errorf("explicit penalty became %v", m.penalty)
	}
}
