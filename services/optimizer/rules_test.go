package optimizer

import (
	"errors"
	"github.com/ilb-router/ilb/solver/prior"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
)

func TestScheduleDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := schedule{minGap: 2 * time.Second, maxGap: 30 * time.Second, settle: 200 * time.Millisecond}
	s.markDirty(at(0))
	if got := s.due(); !got.Equal(at(200)) {
		t.Fatalf("first solve due %v, want settle after the first trigger", got.Sub(t0))
	}
	s.solved(at(200))
	if got := s.due(); !got.Equal(at(30200)) {
		t.Fatalf("idle: due %v, want max interval after the solve", got.Sub(t0))
	}
	s.markDirty(at(500))
	s.markDirty(at(1500)) // coalesced into the first
	if got := s.due(); !got.Equal(at(2200)) {
		t.Fatalf("triggered soon after a solve: due %v, want min interval after it", got.Sub(t0))
	}
	s.solved(at(2200))
	s.markDirty(at(9000))
	if got := s.due(); !got.Equal(at(9200)) {
		t.Fatalf("triggered long after a solve: due %v, want settle after the trigger", got.Sub(t0))
	}
}

func TestDerateRules(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	cfg := DefaultConfig(f).Derate
	const eng = "east-h100-0"
	for _, c := range []struct {
		name   string
		row    func(r *schemas.Feature)
		factor float64
		reason string
	}{
		{"healthy", func(r *schemas.Feature) {}, 1, ""},
		{"unhealthy", func(r *schemas.Feature) { r.Healthy = false }, 0, derateUnhealthy},
		{"no ready replica", func(r *schemas.Feature) { r.ReadyReplicas = 0 }, 0, derateNoReady},
		{"no status in window", func(r *schemas.Feature) { r.StatusEvents, r.Healthy, r.ReadyReplicas = 0, false, 0 }, 1, ""},
		{"error rate 30%", func(r *schemas.Feature) { r.Errors, r.ErrorRate = 30, 0.3 }, 0.7, derateErrors},
		{"error rate 2% among error-free peers", func(r *schemas.Feature) { r.Errors, r.ErrorRate = 2, 0.02 }, 1, ""},
		{"error rate 8% among error-free peers", func(r *schemas.Feature) { r.Errors, r.ErrorRate = 8, 0.08 }, 0.92, derateErrors},
		{"silent", func(r *schemas.Feature) {
			r.WindowStartUnixNano -= int64(2 * time.Minute)
			r.WindowEndUnixNano -= int64(2 * time.Minute)
		}, 0, derateSilent},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := newInputs(f)
			rows := []schemas.Feature{}
			for _, e := range f.Engines {
				r := engineRow(20, e.Name, 1)
				r.Requests = 100
				if e.Name == eng {
					c.row(&r)
				}
				rows = append(rows, r)
			}
			in.addFeatures(rows)
			caps := derate(cfg, in, prior.Shape{PromptTokens: 1000, OutputTokens: in.fleet.MeanOutputTokens})
			got := caps[slices.IndexFunc(caps, func(c engineCap) bool { return c.fleet.Name == eng })]
			if math.Abs(got.factor-c.factor) > 1e-12 {
				t.Errorf("factor %v, want %v (reasons %v)", got.factor, c.factor, got.reasons)
			}
			if want := c.reason; (want == "") != (len(got.reasons) == 0) || (want != "" && got.reasons[0] != want) {
				t.Errorf("reasons %v, want %q", got.reasons, want)
			}
		})
	}
}

func TestDerateReplicas(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	f.Engines[0].Replicas = 4
	in := newInputs(f)
	r := engineRow(3, f.Engines[0].Name, 1)
	r.ReadyReplicas = 3
	in.addFeatures([]schemas.Feature{r})
	c := derate(DefaultConfig(f).Derate, in, prior.Shape{PromptTokens: 1000, OutputTokens: f.MeanOutputTokens})[0]
	if c.factor != 0.75 || !slices.Equal(c.reasons, []string{derateReplicas}) {
		t.Fatalf("3 of 4 replicas ready: factor %v reasons %v, want 0.75 [replicas]", c.factor, c.reasons)
	}
	if want := 0.75 * c.profile.engine.CapacityRps; c.capacity() != want {
		t.Fatalf("capacity %v, want %v", c.capacity(), want)
	}
}

func TestInputsKeepLatest(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	in := newInputs(f)
	if !in.addFeatures([]schemas.Feature{engineRow(5, "eu-h100-0", 2)}) {
		t.Fatal("first row: not kept")
	}
	if in.addFeatures([]schemas.Feature{engineRow(5, "eu-h100-0", 3)}) {
		t.Error("a window re-emitted (same end) must change nothing")
	}
	if in.addFeatures([]schemas.Feature{engineRow(4, "eu-h100-0", 3)}) {
		t.Error("an older window must change nothing")
	}
	bad := engineRow(6, "eu-h100-0", 1)
	bad.ErrorRate = 2
	in.addFeatures([]schemas.Feature{bad, engineRow(6, "no-such-engine", 1), pairRow(6, "no-such-cluster", "eu-h100-0", 1)})
	if in.rejected[rejectInvalid] != 1 || in.rejected[rejectUnknown] != 2 {
		t.Errorf("rejected %v, want 1 invalid and 2 unknown", in.rejected)
	}
	if in.engines["eu-h100-0"].ArrivalRPS != 2 {
		t.Errorf("kept row has %v rps, want the first window-5 row", in.engines["eu-h100-0"].ArrivalRPS)
	}
}

func TestDemandEstimate(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	in := newInputs(f)
	d := newDemand(DefaultConfig(f).Demand)
	if got := d.rps("fe-east", 7); got != 7 {
		t.Fatalf("before any window: %v, want the prior", got)
	}
	in.addFeatures([]schemas.Feature{pairRow(1, "fe-east", "east-h100-0", 3), pairRow(1, "fe-east", "east-a100-0", 1)})
	d.update(in, routing.NewRows(in.fleet), nil)
	if got := d.rps("fe-east", 7); got != 4 {
		t.Fatalf("first window: %v rps, want the observation 4", got)
	}
	// fe-east shed 20% in window 2: 4 rps served means 5 demanded.
	in.addFeatures([]schemas.Feature{pairRow(2, "fe-east", "east-h100-0", 4)})
	d.update(in, routing.NewRows(in.fleet), map[string]float64{"fe-east": 0.2})
	if got := d.rps("fe-east", 7); math.Abs(got-(0.5*5+0.5*4)) > 1e-12 {
		t.Fatalf("second window: %v rps, want EWMA of 5 (shed-corrected) and 4", got)
	}
	d.update(in, routing.NewRows(in.fleet), map[string]float64{"fe-east": 0.2}) // same window again: no change
	if got := d.rps("fe-east", 7); math.Abs(got-4.5) > 1e-12 {
		t.Fatalf("a window folded in twice: %v", got)
	}
	// Window 3 has no row for the (fe-east, east-a100-0) pair that window 1
	// had: the stale pair must not count.
	in.addFeatures([]schemas.Feature{pairRow(3, "fe-east", "east-h100-0", 4.5)})
	d.update(in, routing.NewRows(in.fleet), nil)
	if got := d.rps("fe-east", 7); math.Abs(got-4.5) > 1e-12 {
		t.Fatalf("third window: %v rps, want 4.5", got)
	}
	// Shedding everything: the correction is capped, not infinite.
	in.addFeatures([]schemas.Feature{pairRow(4, "fe-east", "east-h100-0", 1)})
	d.update(in, routing.NewRows(in.fleet), map[string]float64{"fe-east": 1})
	if got := d.observed["fe-east"]; math.Abs(got-10) > 1e-9 {
		t.Fatalf("all shed: raw demand %v, want 1/(1-0.9) = 10", got)
	}
}

func TestPriorDemand(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	caps := derate(DefaultConfig(f).Derate, newInputs(f), prior.Shape{PromptTokens: 1000, OutputTokens: f.MeanOutputTokens})
	got := priorDemand(f, routing.NewRows(f), caps, 0.5)
	if math.Abs(got["fe-east"]-12*0.45) > 1e-9 || math.Abs(got["fe-eu"]-12*0.25) > 1e-9 {
		t.Fatalf("prior demand %v, want total_demand_rps 12 split by shares", got)
	}
	f.TotalDemandRPS = 0
	got = priorDemand(f, routing.NewRows(f), caps, 0.5)
	total := 0.0
	for _, c := range caps {
		total += c.capacity() * f.MaxUtilization
	}
	if math.Abs(got["fe-west"]-0.5*total*0.3) > 1e-9 {
		t.Fatalf("prior demand without total_demand_rps: %v, want half the capped capacity by share", got)
	}
}

func TestBuildProblemEligibility(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	in := newInputs(f)
	rows := []schemas.Feature{}
	for _, e := range f.Engines {
		r := engineRow(1, e.Name, 1)
		if e.Name == "east-a100-0" {
			r.Healthy = false
		}
		rows = append(rows, r)
	}
	in.addFeatures(rows)
	caps := derate(DefaultConfig(f).Derate, in, prior.Shape{PromptTokens: 1000, OutputTokens: f.MeanOutputTokens})
	p, err := buildProblem(f, routing.NewRows(f), caps, map[string]float64{"fe-east": 1, "fe-west": 1, "fe-eu": 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Eligible["fe-eu"], []string{"eu-a100-0", "eu-h100-0"}) {
		t.Errorf("fe-eu (residency eu) may use %v, want only the eu engines", p.Eligible["fe-eu"])
	}
	if slices.Contains(p.Eligible["fe-east"], "east-a100-0") || len(p.Engines) != 5 {
		t.Errorf("an unhealthy engine is in the problem: %v", p.Eligible["fe-east"])
	}
	if got := p.NetworkMs["fe-west"]["east-h100-0"]; got != 72 {
		t.Errorf("network fe-west -> east-h100-0 = %v, want 72 (west-us -> east-us)", got)
	}
	all := derate(DefaultConfig(f).Derate, in, prior.Shape{PromptTokens: 1000, OutputTokens: f.MeanOutputTokens})
	for i := range all {
		all[i].factor = 0
	}
	if _, err := buildProblem(f, routing.NewRows(f), all, nil); err != errNoEngine {
		t.Errorf("every engine down: %v, want errNoEngine", err)
	}
}

// TestCheckSolutionWiring: the gate before publishing is
// routing.CheckSolution, whose rules are tested there. The optimizer
// passes a good solution and rejects a bad one with an error that names
// the optimizer and still wraps routing.ErrRejected.
func TestCheckSolutionWiring(t *testing.T) {
	p := &optimize.Problem{MeanOutputTokens: 200, MaxUtilization: 0.9, ShedPenaltyMs: 60000,
		Clusters: []optimize.Cluster{{Name: "a", DemandRps: 10}},
		Engines:  []optimize.Engine{{Name: "x", CapacityRps: 20}, {Name: "y", CapacityRps: 20}},
		Eligible: map[string][]string{"a": {"x"}}}
	sol := &optimize.Solution{Weights: map[string]map[string]float64{"a": {"x": 0.9}},
		ShedFraction: map[string]float64{"a": 0.1}, EngineLoadRps: map[string]float64{"x": 9}}
	if err := checkSolution(p, sol); err != nil {
		t.Fatalf("a good solution is rejected: %v", err)
	}
	sol.Weights["a"]["x"], sol.Weights["a"]["y"] = 0.5, 0.4 // y is not eligible
	err := checkSolution(p, sol)
	if !errors.Is(err, routing.ErrRejected) || !strings.HasPrefix(err.Error(), "optimizer: ") {
		t.Fatalf("weight on an ineligible engine: %v; want an optimizer error wrapping routing.ErrRejected", err)
	}
}

// TestPlans: each cluster's plan is the solution's weights normalized
// (routing.Normalize, tested there: tiny weights dropped, the rest summing
// to 1 − shed) with a selection table over them. An idle cluster keeps
// its published weights on the engines it may still use, rescaled to its
// published shed fraction; an idle cluster with nothing published takes
// the solution's.
func TestPlans(t *testing.T) {
	p := &optimize.Problem{Clusters: []optimize.Cluster{{Name: "busy"}, {Name: "idle"}, {Name: "new"}},
		Eligible: map[string][]string{"busy": {"x", "y", "z"}, "idle": {"x", "y"}, "new": {"y"}}}
	sol := &optimize.Solution{
		Weights: map[string]map[string]float64{"busy": {"x": 0.6000001, "y": 0.2999999, "z": 1e-9},
			"idle": {"x": 1}, "new": {"y": 0.5}},
		ShedFraction: map[string]float64{"busy": 0.1, "idle": 0, "new": 0.5}}
	o := &Optimizer{rows: &routing.Rows{Single: true, Rows: []routing.Row{{Name: "busy"}, {Name: "idle", Cluster: 1}, {Name: "new", Cluster: 2}}},
		prev: published{solution: routing.Anchor(map[string]map[string]float64{"idle": {"x": 0.2, "y": 0.4, "z": 0.3}},
			map[string]float64{"idle": 0.1}, nil)}}
	cold, err := o.plans(p, sol, map[string]bool{"idle": true, "new": true}, false, 0, o.cfg.Smooth)
	if err != nil {
		t.Fatal(err)
	}
	if cold[0].shed != 0 || math.Abs(cold[0].weights["x"]+cold[0].weights["y"]-1) > 1e-9 {
		t.Errorf("before any demand was observed: %+v, want no shed and weights summing to 1", cold[0])
	}
	plans, err := o.plans(p, sol, map[string]bool{"idle": true, "new": true}, true, 0, o.cfg.Smooth)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		cluster string
		weights map[string]float64
		shed    float64
		kept    bool
	}{
		{"busy", map[string]float64{"x": 0.6, "y": 0.3}, 0.1, false},
		{"idle", map[string]float64{"x": 0.3, "y": 0.6}, 0.1, true},
		{"new", map[string]float64{"y": 0.5}, 0.5, false},
	} {
		pl := plans[i]
		if pl.row != want.cluster || pl.kept != want.kept || pl.shed != want.shed || len(pl.weights) != len(want.weights) {
			t.Errorf("plan %d: %+v, want %+v", i, pl, want)
			continue
		}
		sum := pl.shed
		for e, w := range want.weights {
			if math.Abs(pl.weights[e]-w) > 1e-6 {
				t.Errorf("%s: weight of %s %v, want %v", pl.row, e, pl.weights[e], w)
			}
			sum += pl.weights[e]
		}
		if math.Abs(sum-1) > 1e-15 {
			t.Errorf("%s: weights and shed sum to %v, want 1", pl.row, sum)
		}
		if pl.table == nil || !slices.Equal(pl.table.Engines(), slices.Sorted(maps.Keys(want.weights))) {
			t.Errorf("%s: table %v, want one over %v", pl.row, pl.table, want.weights)
		}
	}
}

// TestConfigValidatesDerate: Config.Validate runs routing's check of the
// derate settings (its rules are tested there) and says which part failed.
func TestConfigValidatesDerate(t *testing.T) {
	cfg := DefaultConfig(schemas.ExampleFleetOneModel())
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cfg.Derate.MinEngines = 1
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "optimizer: config: derate: ") ||
		!strings.Contains(err.Error(), "min engines") {
		t.Fatalf("min engines 1: %v; want the derate setting named", err)
	}
}

// TestFittedCapacityCappedByPrior: a fit whose capacity lies far above
// what the engine model of its fleet parameters can serve is capped at
// routing.FitCapacitySlack × the prior; one below it is kept.
func TestFittedCapacityCappedByPrior(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	in := newInputs(f)
	e := f.Engines[0]
	pr := PriorProfile(e, 1024, f.MeanOutputTokens)
	in.addProfiles([]schemas.Profile{{Engine: e.Name, SKU: e.SKU, FittedAtUnixNano: 1, CapacityRPS: 3 * pr.CapacityRps,
		TTFTBaseMs: 140, TTFTQueueMs: 30, TBOTBaseMs: 30, TBOTSlopeMs: 40, Samples: 20, LoadMinRPS: 1, LoadMaxRPS: 2}})
	if got := in.profileFor(e, prior.Shape{PromptTokens: 1024, OutputTokens: f.MeanOutputTokens}); got.source != sourceFitted || math.Abs(got.engine.CapacityRps-routing.FitCapacitySlack*pr.CapacityRps) > 1e-9 {
		t.Errorf("fit at 3x the prior: %+v, want capacity %v", got, routing.FitCapacitySlack*pr.CapacityRps)
	}
	in.addProfiles([]schemas.Profile{{Engine: e.Name, SKU: e.SKU, FittedAtUnixNano: 2, CapacityRPS: pr.CapacityRps / 2,
		TTFTBaseMs: 140, TTFTQueueMs: 30, TBOTBaseMs: 30, TBOTSlopeMs: 40, Samples: 20, LoadMinRPS: 0.5, LoadMaxRPS: 1}})
	if got := in.profileFor(e, prior.Shape{PromptTokens: 1024, OutputTokens: f.MeanOutputTokens}); got.engine.CapacityRps != pr.CapacityRps/2 {
		t.Errorf("fit below the prior: capacity %v, want %v", got.engine.CapacityRps, pr.CapacityRps/2)
	}
}

// TestPlansSmoothWhileShedding: a row that sheds moves toward the
// solution at the pace of cfg.Smooth (routing.Smooth, tested there), by
// the window time since this instance's last publish; with that time not
// known (0), or smoothing off, the solution is published as it is.
func TestPlansSmoothWhileShedding(t *testing.T) {
	p := &optimize.Problem{Clusters: []optimize.Cluster{{Name: "busy", DemandRps: 10}},
		Engines:  []optimize.Engine{{Name: "x", CapacityRps: 5}, {Name: "y", CapacityRps: 5}},
		Eligible: map[string][]string{"busy": {"x", "y"}}}
	sol := &optimize.Solution{Weights: map[string]map[string]float64{"busy": {"x": 0.5, "y": 0.3}},
		ShedFraction: map[string]float64{"busy": 0.2}}
	cfg := DefaultConfig(schemas.ExampleFleetOneModel())
	o := &Optimizer{cfg: cfg, rows: &routing.Rows{Single: true, Rows: []routing.Row{{Name: "busy"}}},
		prev: published{solution: routing.Anchor(map[string]map[string]float64{"busy": {"x": 0.9}},
			map[string]float64{"busy": 0.1}, nil)}}
	plans, err := o.plans(p, sol, nil, true, 5*time.Second, cfg.Smooth)
	if err != nil {
		t.Fatal(err)
	}
	step := 1 - math.Exp(-5/cfg.Smooth.Shed.Seconds())
	if got, want := plans[0].shed, 0.1+step*0.1; math.Abs(got-want) > 1e-12 {
		t.Errorf("shed %v five seconds after the publish, want %v", got, want)
	}
	if y := plans[0].weights["y"]; !(y > 0 && y < 0.1) {
		t.Errorf("y's weight %v, want a small step toward the solution's 0.3", y)
	}
	for _, c := range []struct {
		name   string
		smooth routing.SmoothConfig
		dt     time.Duration
	}{{"time since publish not known", cfg.Smooth, 0}, {"smoothing off", routing.SmoothConfig{}, 5 * time.Second}} {
		o.cfg.Smooth = c.smooth
		plans, err := o.plans(p, sol, nil, true, c.dt, c.smooth)
		if err != nil {
			t.Fatal(err)
		}
		if plans[0].shed != 0.2 || math.Abs(plans[0].weights["y"]-0.3) > 1e-12 {
			t.Errorf("%s: %v shed %v, want the solution's", c.name, plans[0].weights, plans[0].shed)
		}
	}
}

// TestPlansSmoothWithReuse: a row that sheds nothing keeps its split
// while the engines serve prompts from their prefix caches (the request
// shape's cached fraction), moving at the pace of cfg.Smooth.Reuse; when
// they serve none from cache, at the faster pace of cfg.Smooth.Calm. Once
// an overload has ended (routing.SmoothConfig.Released) the first keeps
// its pace and the second is published as solved.
func TestPlansSmoothWithReuse(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	p := &optimize.Problem{MaxUtilization: 0.95, Clusters: []optimize.Cluster{{Name: "calm", DemandRps: 4}},
		Engines:  []optimize.Engine{{Name: "x", CapacityRps: 5}, {Name: "y", CapacityRps: 5}},
		Eligible: map[string][]string{"calm": {"x", "y"}}}
	sol := &optimize.Solution{Weights: map[string]map[string]float64{"calm": {"x": 0.2, "y": 0.8}},
		ShedFraction: map[string]float64{"calm": 0}}
	cfg := DefaultConfig(f)
	for _, c := range []struct {
		name   string
		cached float64 // share of prompt tokens from cache
		sc     routing.SmoothConfig
		wantX  float64
	}{
		{"conversations reuse the cache", 0.3, cfg.Smooth, 0.8 - (1-math.Exp(-5/cfg.Smooth.Reuse.Seconds()))*0.6},
		{"no reuse", 0, cfg.Smooth, 0.8 - (1-math.Exp(-5/cfg.Smooth.Calm.Seconds()))*0.6},
		// After an overload (routing.Release): the cache still holds the
		// conversations' context, a row without reuse follows the solver.
		{"released, conversations reuse the cache", 0.3, cfg.Smooth.Released(), 0.8 - (1-math.Exp(-5/cfg.Smooth.Reuse.Seconds()))*0.6},
		{"released, no reuse", 0, cfg.Smooth.Released(), 0.2},
	} {
		o := &Optimizer{cfg: cfg, rows: &routing.Rows{Single: true, Rows: []routing.Row{{Name: "calm"}}},
			shape: newShape(cfg.ShapeAlpha, cfg.ShapeOutputAlpha, cfg.MeanPromptTokens, f),
			prev:  published{solution: routing.Anchor(map[string]map[string]float64{"calm": {"x": 0.8, "y": 0.2}}, map[string]float64{"calm": 0}, nil)}}
		o.shape.est.Observe(100, 100*4000, 100*4000*c.cached, 100*300, 100*4000*4000)
		o.shape.est.Roll()
		plans, err := o.plans(p, sol, nil, true, 5*time.Second, c.sc)
		if err != nil {
			t.Fatal(err)
		}
		if got := plans[0].weights["x"]; math.Abs(got-c.wantX) > 1e-12 || plans[0].shed != 0 {
			t.Errorf("%s: x's weight %v shed %v five seconds after the publish, want %v and no shed", c.name, got, plans[0].shed, c.wantX)
		}
	}
}

// TestSincePublishIsWindowTime: the time smoothing uses is the window
// (event) time since this instance's last publish, so that a replay
// smooths as the live run did; 0 before it has published.
func TestSincePublishIsWindowTime(t *testing.T) {
	o := &Optimizer{in: &inputs{newestEnd: int64(40 * time.Second)}}
	if d := o.sincePublish(); d != 0 {
		t.Errorf("before any publish: %v, want 0", d)
	}
	o.prevAsOf = int64(30 * time.Second)
	if d := o.sincePublish(); d != 10*time.Second {
		t.Errorf("%v since the last publish, want 10s", d)
	}
}
