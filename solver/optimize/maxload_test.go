package optimize

import (
	"math"
	"strings"
	"testing"
)

// TestMaxLoadCapsAnEngine: an engine's max_load_rps caps its load below
// max_utilization × capacity; the demand the caps cannot take is shed,
// the rest flows to the other engine, and the certificate still closes.
// A cap at or above max_utilization × capacity changes nothing, and a
// negative or NaN cap is rejected by name.
func TestMaxLoadCapsAnEngine(t *testing.T) {
	base := func() *Problem {
		return &Problem{MeanOutputTokens: 100, MaxUtilization: 0.9,
			Clusters: []Cluster{{Name: "c", DemandRps: 3}},
			Engines: []Engine{
				{Name: "fast", CapacityRps: 2, TTFT: TTFT{BaseMs: 100, QueueMs: 50}, TBOT: TBOT{BaseMs: 20, SlopeMs: 10}},
				{Name: "slow", CapacityRps: 2, TTFT: TTFT{BaseMs: 300, QueueMs: 50}, TBOT: TBOT{BaseMs: 40, SlopeMs: 10}},
			},
			NetworkMs: map[string]map[string]float64{"c": {"fast": 1, "slow": 1}}}
	}
	opts := Options{Tolerance: 1e-9, MaxNewtonSteps: 2000}
	p := base()
	p.Engines[0].MaxLoadRps = 0.5
	sol, err := Solve(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	fast, slow := sol.EngineLoadRps["fast"], sol.EngineLoadRps["slow"]
	if math.Abs(fast-0.5) > 1e-6 || math.Abs(slow-1.8) > 1e-6 {
		t.Errorf("loads fast %v slow %v, want fast at its cap 0.5 and slow at 0.9 × 2", fast, slow)
	}
	if shed := sol.ShedFraction["c"] * 3; math.Abs(shed-0.7) > 1e-6 {
		t.Errorf("shed %v rps, want the 0.7 the caps cannot take", shed)
	}
	if !(sol.Gap <= 1e-9) {
		t.Errorf("gap %v: the certificate does not close", sol.Gap)
	}
	// A cap above max_utilization × capacity is no cap.
	loose, plain := base(), base()
	loose.Engines[0].MaxLoadRps = 5
	a, err := Solve(loose, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Solve(plain, opts)
	if err != nil {
		t.Fatal(err)
	}
	if a.EngineLoadRps["fast"] != b.EngineLoadRps["fast"] || a.ShedFraction["c"] != b.ShedFraction["c"] {
		t.Errorf("a cap above max_utilization × capacity changed the solution: %v against %v", a.EngineLoadRps, b.EngineLoadRps)
	}
	for _, v := range []float64{-1, math.NaN()} {
		bad := base()
		bad.Engines[1].MaxLoadRps = v
		if _, err := Solve(bad, opts); err == nil || !strings.Contains(err.Error(), "max_load_rps") {
			t.Errorf("max_load_rps %v: %v, want an error naming it", v, err)
		}
	}
}
