package optimize

import (
	"math"
	"os"
	"strings"
	"testing"
)

// sharedEngineProblem: one cluster, engine "a" serving only model "flex",
// engine "s" serving "flex" and "pinned". The flexible model can use both
// engines; the pinned one only s.
func sharedEngineProblem(flex, pinned float64) *Problem {
	eng := func(name string, models ...string) Engine {
		return Engine{Name: name, CapacityRps: 100, TTFT: TTFT{BaseMs: 150, QueueMs: 40},
			TBOT: TBOT{BaseMs: 20, SlopeMs: 15}, Models: models}
	}
	return &Problem{
		MeanOutputTokens: 200, MaxUtilization: 0.95,
		Clusters:  []Cluster{{Name: "fe"}},
		Engines:   []Engine{eng("a", "flex"), eng("s", "flex", "pinned")},
		NetworkMs: map[string]map[string]float64{"fe": {"a": 5, "s": 1}},
		Demands: []Demand{
			{Cluster: "fe", Model: "flex", DemandRps: flex},
			{Cluster: "fe", Model: "pinned", DemandRps: pinned},
		},
	}
}

// TestSharedEngineSelfBalancing is the talk's self-balancing made
// explicit: as demand for the model only the shared engine serves grows,
// the flexible model moves off that engine, and no solution ever sends
// the pinned model to the engine that lacks it.
func TestSharedEngineSelfBalancing(t *testing.T) {
	prevFlexOnS := math.Inf(1)
	for _, pinned := range []float64{0, 10, 20, 40, 60, 80} {
		p, err := sharedEngineProblem(60, pinned).Expand()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Eligible["fe/pinned"]; len(got) != 1 || got[0] != "s" {
			t.Fatalf("pinned may use %v, want [s]", got)
		}
		sol, err := Solve(p, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		checkFeasible(t, p, sol, 1e-6)
		if w := sol.Weights["fe/pinned"]["a"]; w != 0 {
			t.Fatalf("pinned=%v: %v of the pinned model on engine a, which lacks it", pinned, w)
		}
		if pinned > 0 && sol.ShedFraction["fe/pinned"] > 1e-9 {
			t.Errorf("pinned=%v: sheds %v with capacity to spare", pinned, sol.ShedFraction["fe/pinned"])
		}
		flexOnS := 60 * sol.Weights["fe/flex"]["s"]
		if flexOnS > prevFlexOnS+1e-6 {
			t.Errorf("pinned=%v: flexible load on s rose to %.3f from %.3f", pinned, flexOnS, prevFlexOnS)
		}
		prevFlexOnS = flexOnS
		t.Logf("pinned %3.0f rps: flex on s %.2f rps, on a %.2f rps", pinned, flexOnS, 60*sol.Weights["fe/flex"]["a"])
	}
	if prevFlexOnS > 1e-6 {
		t.Errorf("with the shared engine busy with the pinned model, %.3f rps of flex still on it", prevFlexOnS)
	}
}

func TestExpand(t *testing.T) {
	p := sharedEngineProblem(10, 5)
	p.Engines[0].MaxContextTokens = 8192
	p.Demands = append(p.Demands, Demand{Cluster: "fe", Model: "flex", MinPromptTokens: 8192, DemandRps: 2})
	p.Demands[0].MaxPromptTokens = 8192
	q, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"fe/flex/0-8192": {"a", "s"}, "fe/pinned": {"s"}, "fe/flex/8192-inf": {"s"}}
	if len(q.Clusters) != 3 || len(q.Demands) != 0 {
		t.Fatalf("expanded clusters %+v, demands %d", q.Clusters, len(q.Demands))
	}
	for name, elig := range want {
		if got := strings.Join(q.Eligible[name], ","); got != strings.Join(elig, ",") {
			t.Errorf("%s may use %s, want %v", name, got, elig)
		}
		for _, e := range elig {
			if q.NetworkMs[name][e] != p.NetworkMs["fe"][e] {
				t.Errorf("%s network to %s %v", name, e, q.NetworkMs[name][e])
			}
		}
	}
	if len(p.Demands) != 3 || len(p.Clusters) != 1 {
		t.Error("Expand changed its receiver")
	}
}

func TestExpandErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Problem)
		want   string
	}{
		{"unknown cluster", func(p *Problem) { p.Demands[0].Cluster = "fe-x" }, `demands[0] (fe-x/flex): unknown cluster "fe-x"`},
		{"own demand", func(p *Problem) { p.Clusters[0].DemandRps = 3 }, `cluster "fe" has demand_rps 3 of its own`},
		{"unserved model", func(p *Problem) { p.Demands[1].Model = "gpt" }, `demands[1] (fe/gpt): no engine serves model "gpt"`},
		{"too long", func(p *Problem) {
			p.Engines[1].MaxContextTokens = 4096
			p.Demands[1].MaxPromptTokens = 8192
		}, `demands[1] (fe/pinned/0-8192): no engine serves model "pinned" with prompts up to 8192 tokens`},
		{"twice", func(p *Problem) { p.Demands[1].Model = "flex" }, "demands[1] (fe/flex): row listed twice"},
		{"bad band", func(p *Problem) { p.Demands[0].MinPromptTokens, p.Demands[0].MaxPromptTokens = 10, 5 }, "min_prompt_tokens 10 must be below max_prompt_tokens 5"},
		{"negative demand", func(p *Problem) { p.Demands[0].DemandRps = -1 }, "demand_rps is negative"},
		{"nan demand", func(p *Problem) { p.Demands[0].DemandRps = math.NaN() }, "demand_rps is not a finite number"},
		{"empty model name", func(p *Problem) { p.Engines[0].Models = []string{""} }, `engine "a" lists an empty model name`},
		{"model twice", func(p *Problem) { p.Engines[0].Models = []string{"x", "x"} }, `engine "a" lists model "x" twice`},
		{"negative context", func(p *Problem) { p.Engines[0].MaxContextTokens = -1 }, `engine "a" max_context_tokens -1 is negative`},
		{"base invalid", func(p *Problem) { p.MaxUtilization = 2 }, "max_utilization is 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := sharedEngineProblem(10, 5)
			tc.mutate(p)
			_, err := p.Expand()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Solve refuses a problem whose demands were not expanded: it would
	// otherwise solve for clusters without demand.
	if _, err := Solve(sharedEngineProblem(10, 5), DefaultOptions()); err == nil || !strings.Contains(err.Error(), "not expanded") {
		t.Errorf("Solve of an unexpanded problem: %v", err)
	}
}

// TestParseClassesExample: the example problem with demands parses into
// its expanded form and solves without sending a model where it is not
// served.
func TestParseClassesExample(t *testing.T) {
	data, err := os.ReadFile("testdata/classes.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProblem(data)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := Solve(p, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	checkFeasible(t, p, sol, 1e-6)
	for _, name := range []string{"fe-a/llama-3-8b", "fe-b/llama-3-8b"} {
		for e := range sol.Weights[name] {
			if e != "eng-c" {
				t.Errorf("%s sent to %s, which does not serve llama-3-8b", name, e)
			}
		}
	}
	for e := range sol.Weights["fe-b/llama-3-70b/8192-inf"] {
		if e != "eng-b" {
			t.Errorf("long llama-3-70b prompts sent to %s, whose context is 8192", e)
		}
	}
}

// TestClassFleetExpands: the benchmark's classes regime, built through
// Expand from engine models and context limits, gives every row exactly
// the engines of its model that reach its band.
func TestClassFleetExpands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1,200-row problem")
	}
	p := regimeFleet(t, regimeClasses, 100, 1000)
	if len(p.Clusters) != 100*classModels*len(bandShare) || len(p.Engines) != 1000 {
		t.Fatalf("%d rows, %d engines", len(p.Clusters), len(p.Engines))
	}
	for r, c := range p.Clusters {
		m, b := r/len(bandShare)%classModels, r%len(bandShare)
		want := classEngines(p, m, b)
		if got := p.Eligible[c.Name]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("row %s may use %d engines, want %d", c.Name, len(got), len(want))
		}
	}
}
