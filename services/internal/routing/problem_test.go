package routing

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
)

func TestBuildProblem(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	engines := make([]optimize.Engine, len(f.Engines))
	for i := range engines {
		engines[i] = optimize.Engine{Name: "ignored", CapacityRps: 3, TTFT: optimize.TTFT{BaseMs: 100, QueueMs: 50},
			TBOT: optimize.TBOT{BaseMs: 30, SlopeMs: 20}}
	}
	engines[2].CapacityRps = 0 // east-a100-0: derated away
	p, err := BuildProblem(f, NewRows(f), engines, []float64{1, 2, 3}, 250)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range p.Engines {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"east-h100-0", "east-h100-1", "eu-a100-0", "eu-h100-0", "west-a100-0"}) {
		t.Errorf("engines %v: want the fleet's with capacity, sorted", names)
	}
	if !slices.Equal(p.Eligible["fe-eu"], []string{"eu-a100-0", "eu-h100-0"}) {
		t.Errorf("fe-eu (residency eu) may use %v", p.Eligible["fe-eu"])
	}
	if p.MeanOutputTokens != 250 || p.Clusters[1].DemandRps != 2 || p.NetworkMs["fe-west"]["east-h100-0"] != 72 {
		t.Errorf("problem %+v", p)
	}
	for i := range engines {
		engines[i].CapacityRps = 0
	}
	if _, err := BuildProblem(f, NewRows(f), engines, nil, 250); !errors.Is(err, ErrNoEngine) {
		t.Errorf("every engine down: %v, want ErrNoEngine", err)
	}
}

func TestCheckSolution(t *testing.T) {
	p := &optimize.Problem{MeanOutputTokens: 200, MaxUtilization: 0.9, ShedPenaltyMs: 60000,
		Clusters: []optimize.Cluster{{Name: "a", DemandRps: 10}},
		Engines:  []optimize.Engine{{Name: "x", CapacityRps: 20}, {Name: "y", CapacityRps: 20}, {Name: "z", CapacityRps: 20}},
		Eligible: map[string][]string{"a": {"x", "y"}}}
	good := func() *optimize.Solution {
		return &optimize.Solution{Weights: map[string]map[string]float64{"a": {"x": 0.6, "y": 0.3}},
			ShedFraction: map[string]float64{"a": 0.1}, EngineLoadRps: map[string]float64{"x": 6, "y": 3}}
	}
	if err := CheckSolution(p, good()); err != nil {
		t.Fatalf("a good solution is rejected: %v", err)
	}
	for name, breakIt := range map[string]func(s *optimize.Solution){
		"ineligible engine": func(s *optimize.Solution) { s.Weights["a"]["z"], s.Weights["a"]["x"] = 0.1, 0.5 },
		"NaN weight":        func(s *optimize.Solution) { s.Weights["a"]["x"] = math.NaN() },
		"sum not 1":         func(s *optimize.Solution) { s.Weights["a"]["x"] = 0.5 },
		"negative":          func(s *optimize.Solution) { s.Weights["a"]["x"], s.Weights["a"]["y"] = -0.1, 1 },
		"missing cluster":   func(s *optimize.Solution) { delete(s.Weights, "a") },
		"overloaded engine": func(s *optimize.Solution) { s.EngineLoadRps["x"] = 18.5 },
		"infinite shed":     func(s *optimize.Solution) { s.ShedFraction["a"] = math.Inf(1) },
	} {
		s := good()
		breakIt(s)
		if err := CheckSolution(p, s); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: %v, want ErrRejected", name, err)
		}
	}
	if err := CheckSolution(p, nil); !errors.Is(err, ErrRejected) {
		t.Errorf("no solution: %v", err)
	}
	// An eligible list out of order (not BuildProblem's) is searched
	// name by name: the same answers.
	p.Eligible["a"] = []string{"y", "x"}
	if err := CheckSolution(p, good()); err != nil {
		t.Fatalf("unsorted eligible: a good solution is rejected: %v", err)
	}
	s := good()
	s.Weights["a"]["z"], s.Weights["a"]["x"] = 0.1, 0.5
	if err := CheckSolution(p, s); !errors.Is(err, ErrRejected) {
		t.Errorf("unsorted eligible, ineligible engine: %v, want ErrRejected", err)
	}
}

func TestNormalizeAndChange(t *testing.T) {
	w, shed := Normalize(map[string]float64{"a": 0.6000001, "b": 0.2999999, "c": 1e-9}, 0.1)
	if _, ok := w["c"]; ok {
		t.Error("a weight below the floor survived")
	}
	if sum := w["a"] + w["b"] + shed; math.Abs(sum-1) > 1e-15 {
		t.Errorf("sum %v, want 1", sum)
	}
	if w, shed := Normalize(map[string]float64{}, 0.2); len(w) != 0 || shed != 1 {
		t.Errorf("no weight left: %v shed %v, want all shed", w, shed)
	}
	a := map[string]float64{"x": 0.5, "y": 0.5}
	if got := Change(a, 0, map[string]float64{"x": 0.8, "y": 0.2}, 0); math.Abs(got-0.3) > 1e-12 {
		t.Errorf("change %v, want the total variation 0.3", got)
	}
	if got := Change(a, 0, map[string]float64{"x": 0.4, "y": 0.4}, 0.2); math.Abs(got-0.2) > 1e-12 {
		t.Errorf("change with shed %v, want 0.2 (shed counted as one more weight)", got)
	}
}

// A Builder builds what BuildProblem builds, whatever it built before:
// engines derated away and back change the routes, the same engines
// reuse them.
func TestBuilderIsBuildProblem(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	rows := NewRows(f)
	var b Builder
	for step := range 16 {
		engines := make([]optimize.Engine, len(f.Engines))
		for i := range engines {
			engines[i] = optimize.Engine{CapacityRps: 3 + float64(step), TTFT: optimize.TTFT{BaseMs: 100, QueueMs: 50},
				TBOT: optimize.TBOT{BaseMs: 30, SlopeMs: 20}}
		}
		switch step % 4 {
		case 1:
			engines[2].CapacityRps = 0
		case 2:
			engines[0].CapacityRps, engines[4].CapacityRps = 0, MinCapacityRPS/2
		}
		if step == 11 {
			for i := range engines {
				engines[i].CapacityRps = 0
			}
		}
		demand, tokens := []float64{1 + float64(step), 2, 3}, 250.0
		switch step { // numbers Validate refuses, with the routes of a valid problem
		case 12:
			demand[1] = math.NaN()
		case 13:
			engines[3].TTFT.BaseMs = -1
		case 14:
			tokens = math.Inf(1)
		}
		want, wantErr := BuildProblem(f, rows, engines, demand, tokens)
		got, gotErr := b.Build(f, rows, engines, demand, tokens)
		if (step == 11 || step >= 12 && step <= 14) != (wantErr != nil) {
			t.Fatalf("step %d: BuildProblem's error %v", step, wantErr)
		}
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("step %d: Builder %+v (%v), BuildProblem %+v (%v)", step, got, gotErr, want, wantErr)
		}
	}
}

// A Tabler's tables are Table's, bit for bit, over a sequence of updates
// with engines gaining and losing weight.
func TestTablerIsTable(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	var tab Tabler
	var prevT, prevW *sched.Table
	for step := range 40 {
		w := map[string]float64{}
		for i, n := range names {
			if (step+i)%5 != 0 {
				w[n] = float64(1 + (step*7+i*3)%11)
			}
		}
		if step == 20 {
			w = map[string]float64{"a": 0}
		}
		want, wantErr := Table(prevW, w)
		got, gotErr := tab.Table(prevT, w)
		same := (got == nil) == (want == nil) && (got == nil || got.Equal(want))
		if (wantErr == nil) != (gotErr == nil) || !same {
			t.Fatalf("step %d: Tabler %v, Table %v", step, gotErr, wantErr)
		}
		prevT, prevW = got, want
	}
}

// TestSLOLoad: the cap lies SLOLoadSlack times past the utilisation where
// the modelled TBOT reaches the SLO, never under MinSLOLoad of the
// capacity (MinSLOUtilization when the model names no load, under
// NoSLOLoad), and is 0 (none) when it would reach max_utilization, when
// TBOT does not rise with load, or without an SLO or a capacity.
func TestSLOLoad(t *testing.T) {
	e := optimize.Engine{Name: "h", CapacityRps: 2, TBOT: optimize.TBOT{BaseMs: 30, SlopeMs: 140}}
	// TBOT reaches 100 ms at ρ = 0.5: the cap is 1.15 × 0.5 × 2 rps.
	if got, want := SLOLoad(e, 100, 0.95), SLOLoadSlack*0.5*2; math.Abs(got-want) > 1e-12 {
		t.Errorf("cap %v rps, want %v", got, want)
	}
	slow := e
	slow.TBOT.BaseMs = 120 // over the SLO at any load
	if got, want := SLOLoad(slow, 100, 0.95), MinSLOUtilization*2; math.Abs(got-want) > 1e-12 {
		t.Errorf("an engine over the SLO at every load: cap %v rps, want the floor %v", got, want)
	}
	// Steep lines: at ρ 0.0375 × slack the model names no load (the floor
	// MinSLOUtilization); at 0.125 × slack and 0.075 × slack it names a
	// small one, kept down to MinSLOLoad.
	for _, c := range []struct {
		slope, want float64
	}{
		{70 / 0.0375, MinSLOUtilization},
		{70 / 0.125, SLOLoadSlack * 0.125},
		{70 / 0.075, MinSLOLoad},
	} {
		steep := e
		steep.TBOT.SlopeMs = c.slope
		if got := SLOLoad(steep, 100, 0.95); math.Abs(got-c.want*2) > 1e-12 {
			t.Errorf("TBOT 30 + %.0f ρ ms: cap %v rps, want %v", c.slope, got, c.want*2)
		}
	}
	for _, c := range []struct {
		name string
		e    optimize.Engine
		slo  float64
	}{
		{"TBOT within the SLO up to max_utilization", e, 200},
		{"flat TBOT", optimize.Engine{CapacityRps: 2, TBOT: optimize.TBOT{BaseMs: 30}}, 100},
		{"no SLO", e, 0},
		{"no capacity", optimize.Engine{TBOT: e.TBOT}, 100},
	} {
		if got := SLOLoad(c.e, c.slo, 0.95); got != 0 {
			t.Errorf("%s: cap %v, want 0 (none)", c.name, got)
		}
	}
}

// TestBuildProblemCapsAtTheSLO: BuildProblem caps each engine at SLOLoad
// of the fleet's tbot_slo_ms, the solver keeps every engine under it and
// sheds the demand above the caps, and CheckSolution rejects a solution
// over an engine's cap.
func TestBuildProblemCapsAtTheSLO(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	rows := NewRows(f)
	engines := make([]optimize.Engine, len(f.Engines))
	capSum := 0.0
	for i := range engines {
		engines[i] = optimize.Engine{CapacityRps: 2, TTFT: optimize.TTFT{BaseMs: 200, QueueMs: 300},
			TBOT: optimize.TBOT{BaseMs: 30, SlopeMs: 140}}
		capSum += SLOLoad(engines[i], f.TBOTSLOMs, f.MaxUtilization)
	}
	if !(capSum > 0) {
		t.Fatalf("the example fleet's TBOT SLO %v ms caps nothing", f.TBOTSLOMs)
	}
	demand := make([]float64, rows.Len())
	for r := range demand {
		demand[r] = 1.5 * capSum / float64(len(demand)) // half again the fleet's SLO load
	}
	p, err := BuildProblem(f, rows, engines, demand, f.MeanOutputTokens)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Engines {
		if want := SLOLoad(e, f.TBOTSLOMs, f.MaxUtilization); e.MaxLoadRps != want || !(want > 0) {
			t.Errorf("engine %s: max_load_rps %v, want SLOLoad %v", e.Name, e.MaxLoadRps, want)
		}
	}
	sol, err := optimize.Solve(p, optimize.Options{Tolerance: 1e-9, MaxNewtonSteps: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSolution(p, sol); err != nil {
		t.Fatal(err)
	}
	served := 0.0
	for _, e := range p.Engines {
		l := sol.EngineLoadRps[e.Name]
		served += l
		if l > e.MaxLoadRps*(1+1e-9) {
			t.Errorf("engine %s: load %v over its SLO cap %v", e.Name, l, e.MaxLoadRps)
		}
	}
	if math.Abs(served-capSum) > 1e-6*capSum {
		t.Errorf("served %v rps, want the fleet's SLO load %v (the rest shed)", served, capSum)
	}
	over := *sol
	over.EngineLoadRps = maps.Clone(sol.EngineLoadRps)
	over.EngineLoadRps[p.Engines[0].Name] = p.Engines[0].MaxLoadRps * 1.01
	if err := CheckSolution(p, &over); err == nil {
		t.Error("CheckSolution accepted an engine 1% over its SLO cap")
	}
}
