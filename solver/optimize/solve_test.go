package optimize

import (
	"math"
	"testing"
)

// one builds a problem with one cluster per demand and the given engines,
// every cluster reaching every engine at the network times net[c][e].
func one(demand []float64, engines []Engine, net [][]float64, tokens, util, penalty float64) *Problem {
	p := &Problem{MeanOutputTokens: tokens, MaxUtilization: util, ShedPenaltyMs: penalty,
		Engines: engines, NetworkMs: map[string]map[string]float64{}}
	for c, d := range demand {
		name := string(rune('A' + c))
		p.Clusters = append(p.Clusters, Cluster{Name: name, DemandRps: d})
		row := map[string]float64{}
		for e, ms := range net[c] {
			row[engines[e].Name] = ms
		}
		p.NetworkMs[name] = row
	}
	return p
}

func engine(name string, capacity, ttftBase, queue, tbotBase, slope float64) Engine {
	return Engine{Name: name, CapacityRps: capacity,
		TTFT: TTFT{BaseMs: ttftBase, QueueMs: queue}, TBOT: TBOT{BaseMs: tbotBase, SlopeMs: slope}}
}

func solveOK(t *testing.T, p *Problem) *Solution {
	t.Helper()
	sol, err := Solve(p, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	checkFeasible(t, p, sol, 1e-9)
	if sol.Gap > 1e-9 {
		t.Errorf("gap %v", sol.Gap)
	}
	return sol
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

// Known answers, solved by hand.

func TestSolveOneEngine(t *testing.T) {
	// L = a + b·ρ/(1−ρ) + c·ρ with a = 100 + 100·10, b = 40, c = 100·5, ρ = ½.
	p := one([]float64{50}, []Engine{engine("e", 100, 100, 40, 10, 5)}, [][]float64{{5}}, 100, 0.9, 1e5)
	sol := solveOK(t, p)
	near(t, "weight", sol.Weights["A"]["e"], 1, 1e-12)
	near(t, "load", sol.EngineLoadRps["e"], 50, 1e-12)
	near(t, "objective", sol.ObjectiveMs, 5+1100+40+250, 1e-12)
}

func TestSolveSplitsEvenly(t *testing.T) {
	e := []Engine{engine("e1", 100, 100, 40, 10, 5), engine("e2", 100, 100, 40, 10, 5)}
	p := one([]float64{120}, e, [][]float64{{3, 3}}, 100, 0.9, 1e5)
	sol := solveOK(t, p)
	near(t, "w1", sol.Weights["A"]["e1"], 0.5, 1e-9)
	near(t, "w2", sol.Weights["A"]["e2"], 0.5, 1e-9)
	near(t, "objective", sol.ObjectiveMs, 3+1100+40*0.6/0.4+500*0.6, 1e-12)
}

func TestSolveEqualMarginals(t *testing.T) {
	// Linear latency L = 100 + 1000·ρ (no queueing), capacity 100: F'(λ) =
	// 100 + 20λ. With network 0 and 100 ms and 100 rps, equal marginals give
	// 20·(λ1 − λ2) = 100 and λ1 + λ2 = 100: λ1 = 52.5, λ2 = 47.5.
	e := []Engine{engine("near", 100, 100, 0, 0, 10), engine("far", 100, 100, 0, 0, 10)}
	p := one([]float64{100}, e, [][]float64{{0, 100}}, 100, 0.9, 1e5)
	sol := solveOK(t, p)
	near(t, "near load", sol.EngineLoadRps["near"], 52.5, 1e-9)
	near(t, "far load", sol.EngineLoadRps["far"], 47.5, 1e-9)
	// (47.5·100 + 100·52.5 + 10·52.5² + 100·47.5 + 10·47.5²) / 100
	near(t, "objective", sol.ObjectiveMs, 648.75, 1e-12)
	near(t, "price", sol.ClusterPriceMs["A"], 100+20*52.5, 1e-9)
}

func TestSolveShedsWhenCapacityIsShort(t *testing.T) {
	p := one([]float64{150}, []Engine{engine("e", 100, 100, 0, 0, 10)}, [][]float64{{0}}, 100, 0.9, 1e5)
	sol := solveOK(t, p)
	near(t, "load", sol.EngineLoadRps["e"], 90, 1e-12)
	near(t, "shed", sol.ShedFraction["A"], 0.4, 1e-12)
	near(t, "objective", sol.ObjectiveMs, (100*90+10*90*90+60*1e5)/150, 1e-12)
}

func TestSolveShedsBelowCapacityWhenCheaper(t *testing.T) {
	// F'(λ) = 100 + 20λ reaches the shed penalty 1100 at λ = 50, well below
	// the cap of 90: past it, refusing a request costs less than serving it.
	p := one([]float64{80}, []Engine{engine("e", 100, 100, 0, 0, 10)}, [][]float64{{0}}, 100, 0.9, 1100)
	sol := solveOK(t, p)
	near(t, "load", sol.EngineLoadRps["e"], 50, 1e-9)
	near(t, "shed", sol.ShedFraction["A"], 30.0/80, 1e-9)
}

func TestSolveTalkExample(t *testing.T) {
	p, err := ParseProblem(talkJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	sol := solveOK(t, p)
	util := func(e string) float64 { return sol.EngineLoadRps[e] / 100 }
	if sol.Weights["fe-b"]["eng-c"] <= 0 {
		t.Errorf("fe-b sends nothing to the farther engine c: %v", sol.Weights["fe-b"])
	}
	if sol.ShedFraction["fe-b"] != 0 || sol.ShedFraction["fe-a"] != 0 {
		t.Errorf("sheds %v with spare capacity", sol.ShedFraction)
	}
	if util("eng-b") >= 1.2 || util("eng-c") > util("eng-b") || util("eng-c") > util("eng-a") {
		t.Errorf("loads a %.3f b %.3f c %.3f: c overloaded in b's place", util("eng-a"), util("eng-b"), util("eng-c"))
	}
	// Nearest-only cannot carry fe-b's 120 rps (cap 95): it sheds 25 rps.
	// Sending only the excess to c is feasible but worse than the optimum.
	nearest := costOf(p, map[string]map[string]float64{"fe-a": {"eng-a": 90}, "fe-b": {"eng-b": 95}}, 25)
	overflow := costOf(p, map[string]map[string]float64{"fe-a": {"eng-a": 90}, "fe-b": {"eng-b": 95, "eng-c": 25}}, 0)
	if !(sol.ObjectiveMs < overflow && overflow < nearest) {
		t.Errorf("objective %v, excess-to-c %v, nearest-only %v", sol.ObjectiveMs, overflow, nearest)
	}
}

// costOf is the objective of explicit flows (rps) and total shed rps.
func costOf(p *Problem, flows map[string]map[string]float64, shed float64) float64 {
	load := map[string]float64{}
	total, cost := 0.0, shed*p.ShedPenaltyMs
	for c, row := range flows {
		for e, x := range row {
			load[e] += x
			cost += x * p.NetworkMs[c][e]
		}
	}
	for _, e := range p.Engines {
		f := newEngineCost(e, p.MeanOutputTokens, p.MaxUtilization)
		cost += f.cost(load[e.Name])
	}
	for _, c := range p.Clusters {
		total += c.DemandRps
	}
	return cost / total
}

func TestSolveEligibility(t *testing.T) {
	e := []Engine{engine("e1", 100, 100, 40, 10, 5), engine("e2", 100, 100, 40, 10, 5), engine("gone", 0, 1, 1, 1, 1)}
	p := one([]float64{50, 50, 30, 0}, e, [][]float64{{1, 50, 0}, {1, 50, 0}, {1, 50, 0}, {9, 1, 0}}, 100, 0.9, 1e5)
	delete(p.NetworkMs["A"], "e2")                         // A cannot reach e2
	p.Eligible = map[string][]string{"B": {"e2"}, "C": {}} // B only e2, C nothing
	sol := solveOK(t, p)
	if w := sol.Weights["A"]; w["e1"] != 1 || len(w) != 1 {
		t.Errorf("A weights %v, want all on e1", w)
	}
	if w := sol.Weights["B"]; w["e2"] != 1 || len(w) != 1 {
		t.Errorf("B weights %v, want all on e2", w)
	}
	if sol.ShedFraction["C"] != 1 || len(sol.Weights["C"]) != 0 {
		t.Errorf("C (no usable engine) weights %v shed %v, want everything shed", sol.Weights["C"], sol.ShedFraction["C"])
	}
	if sol.EngineLoadRps["gone"] != 0 {
		t.Errorf("engine without capacity carries %v", sol.EngineLoadRps["gone"])
	}
	// D has no demand: its weights say where its first request should go,
	// the engine of least network time plus engine price.
	if w := sol.Weights["D"]; w["e2"] != 1 || sol.ShedFraction["D"] != 0 {
		t.Errorf("idle D weights %v shed %v, want e2", w, sol.ShedFraction["D"])
	}
}

func TestSolveNoDemand(t *testing.T) {
	p := one([]float64{0}, []Engine{engine("e", 100, 100, 40, 10, 5)}, [][]float64{{5}}, 100, 0.9, 1e5)
	sol := solveOK(t, p)
	if sol.ObjectiveMs != 0 || sol.EngineLoadRps["e"] != 0 || sol.Weights["A"]["e"] != 1 {
		t.Fatalf("%+v", sol)
	}
}

func TestSolveRejectsBadOptions(t *testing.T) {
	p := one([]float64{1}, []Engine{engine("e", 100, 100, 40, 10, 5)}, [][]float64{{5}}, 100, 0.9, 1e5)
	for _, opt := range []Options{{}, {Tolerance: 1e-9, MaxNewtonSteps: 10, ChurnMs: -1}, {Tolerance: 2, MaxNewtonSteps: 1}} {
		if _, err := Solve(p, opt); err == nil {
			t.Errorf("accepted %+v", opt)
		}
	}
}

func TestSolveFlatLatencyEngines(t *testing.T) {
	// No queueing, no slope: engines cost a flat 100 ms up to their cap of
	// 90 rps, so traffic fills the nearest engine first, then the next.
	e := []Engine{engine("near", 100, 100, 0, 0, 0), engine("far", 100, 100, 0, 0, 0)}
	p := one([]float64{150}, e, [][]float64{{1, 2}}, 100, 0.9, 1e5)
	sol := solveOK(t, p)
	near(t, "near load", sol.EngineLoadRps["near"], 90, 1e-9)
	near(t, "far load", sol.EngineLoadRps["far"], 60, 1e-9)
	near(t, "objective", sol.ObjectiveMs, (90*101+60*102)/150.0, 1e-12)
}
