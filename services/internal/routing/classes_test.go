package routing

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
)

// sharedFleet is a two-model fleet in one region: engine "flex-only"
// serves llama-3-70b, engine "shared" serves llama-3-70b and llama-3-8b,
// engine "long" serves llama-3-70b with no context limit while the other
// two take 8192 prompt tokens at most.
const sharedFleet = `network_ms: {us: {us: 1}}
ttft_slo_ms: 2000
default_model: llama-3-70b
clusters:
  - {name: fe, region: us, demand_share: 1, model_shares: {llama-3-70b: 3, llama-3-8b: 1}}
engines:
  - {name: flex-only, region: us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000, models: [llama-3-70b], max_context_tokens: 8192}
  - {name: shared, region: us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000, models: [llama-3-70b, llama-3-8b], max_context_tokens: 8192}
  - {name: long, region: us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000}
`

func parseFleet(t testing.TB, yaml string) *schemas.Fleet {
	t.Helper()
	f, err := schemas.ParseFleet([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRows(t *testing.T) {
	f := parseFleet(t, sharedFleet)
	rows := NewRows(f)
	names := []string{}
	for _, r := range rows.Rows {
		names = append(names, r.Name)
	}
	want := []string{"fe/llama-3-70b/0-8192", "fe/llama-3-70b/8192-inf", "fe/llama-3-8b/0-8192"}
	if !slices.Equal(names, want) || rows.Single {
		t.Fatalf("rows %v (single %v), want %v", names, rows.Single, want)
	}
	for _, k := range rows.Classes {
		if got := optimize.ClassKey(k.Model, k.MinPromptTokens, k.MaxPromptTokens); got != k.Key() {
			t.Errorf("optimize.ClassKey %q, schemas key %q: the two must agree", got, k.Key())
		}
	}
	for _, tc := range []struct {
		model  string
		tokens int
		row    int
		err    error
	}{
		{"llama-3-70b", 100, 0, nil}, {"llama-3-70b", 9000, 1, nil}, {"llama-3-8b", 8192, 2, nil},
		{"llama-3-8b", 8193, -1, schemas.ErrContextLength}, {"mistral", 1, -1, schemas.ErrUnknownModel},
	} {
		if r, err := rows.Lookup(0, tc.model, tc.tokens); r != tc.row || !errors.Is(err, tc.err) {
			t.Errorf("Lookup(%s, %d) = %d, %v; want %d, %v", tc.model, tc.tokens, r, err, tc.row, tc.err)
		}
	}
	// A fleet of one class keeps one row per cluster, named like it.
	ex := schemas.ExampleFleetOneModel()
	one := NewRows(ex)
	if !one.Single || one.Len() != len(ex.Clusters) || one.Rows[2].Name != ex.Clusters[2].Name {
		t.Fatalf("single-class rows %+v", one.Rows)
	}
	if r, err := one.Lookup(1, "any-model-at-all", 1<<20); r != 1 || err != nil {
		t.Errorf("a fleet without models routes any model: %d, %v", r, err)
	}
	if got := RowShares(f, rows); !reflect.DeepEqual(got, []float64{0.75, 0, 0.25}) {
		t.Errorf("row shares %v: want the model mix on each model's shortest band", got)
	}
}

// sharedEngines are the profiles of sharedFleet's engines, in fleet order.
func sharedEngines() []optimize.Engine {
	e := optimize.Engine{CapacityRps: 100, TTFT: optimize.TTFT{BaseMs: 150, QueueMs: 40}, TBOT: optimize.TBOT{BaseMs: 20, SlopeMs: 15}}
	return []optimize.Engine{e, e, e}
}

// TestBuildProblemClasses: BuildProblem gives each row the engines that
// serve its class, exactly as optimize.Problem.Expand does for the same
// demand rows written in `ilb solve`'s format.
func TestBuildProblemClasses(t *testing.T) {
	f := parseFleet(t, sharedFleet)
	rows := NewRows(f)
	demand := []float64{50, 5, 20}
	p, err := BuildProblem(f, rows, sharedEngines(), demand, 200)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"fe/llama-3-70b/0-8192": {"flex-only", "long", "shared"},
		"fe/llama-3-70b/8192-inf": {"long"}, "fe/llama-3-8b/0-8192": {"shared"}}
	for name, elig := range want {
		if !slices.Equal(p.Eligible[name], elig) {
			t.Errorf("%s may use %v, want %v", name, p.Eligible[name], elig)
		}
	}
	// The same rows through ilb solve's expansion.
	q := &optimize.Problem{MeanOutputTokens: 200, MaxUtilization: f.MaxUtilization,
		Clusters: []optimize.Cluster{{Name: "fe"}}, NetworkMs: map[string]map[string]float64{"fe": {}}}
	for i, fe := range f.Engines {
		e := sharedEngines()[i]
		e.Name, e.Models, e.MaxContextTokens = fe.Name, f.EngineModels(fe), fe.MaxContextTokens
		q.Engines = append(q.Engines, e)
		q.NetworkMs["fe"][fe.Name] = 1
	}
	for r, rw := range rows.Rows {
		k := rows.Classes[rw.Class]
		q.Demands = append(q.Demands, optimize.Demand{Cluster: "fe", Model: k.Model, MinPromptTokens: k.MinPromptTokens,
			MaxPromptTokens: k.MaxPromptTokens, DemandRps: demand[r]})
	}
	x, err := q.Expand()
	if err != nil {
		t.Fatal(err)
	}
	for name, elig := range want {
		got := slices.Clone(x.Eligible[name])
		slices.Sort(got)
		if !slices.Equal(got, elig) {
			t.Errorf("Expand: %s may use %v, BuildProblem %v", name, got, elig)
		}
	}
}

// TestTwoModelsSharedEngine is the first test: over a two-model
// fleet where one engine serves both, the solution never sends a model to
// an engine that lacks it, and the flexible model moves off the shared
// engine as the demand for the model only it serves grows.
func TestTwoModelsSharedEngine(t *testing.T) {
	f := parseFleet(t, sharedFleet)
	rows := NewRows(f)
	prev := math.Inf(1)
	for _, small := range []float64{0, 20, 40, 60, 80} {
		p, err := BuildProblem(f, rows, sharedEngines(), []float64{120, 0, small}, 200)
		if err != nil {
			t.Fatal(err)
		}
		sol, err := optimize.Solve(p, optimize.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckSolution(p, sol); err != nil {
			t.Fatal(err)
		}
		for r, rw := range rows.Rows {
			for e := range sol.Weights[rw.Name] {
				i := slices.IndexFunc(f.Engines, func(fe schemas.FleetEngine) bool { return fe.Name == e })
				if !f.Serves(f.Engines[i], rows.Classes[rw.Class]) {
					t.Fatalf("small=%v: row %d (%s) sent to %s, which does not serve its class", small, r, rw.Name, e)
				}
			}
		}
		onShared := 120 * sol.Weights["fe/llama-3-70b/0-8192"]["shared"]
		if onShared > prev+1e-6 {
			t.Errorf("small=%v: the flexible model's load on the shared engine rose to %.2f from %.2f", small, onShared, prev)
		}
		prev = onShared
	}
	if prev > 0.5 {
		t.Errorf("at 80 rps of llama-3-8b, llama-3-70b still puts %.2f rps on the shared engine", prev)
	}
}

// TestClusterSnapshotRoundTrip: a cluster's rows fold into one snapshot
// (classes plus a demand-weighted top level) and read back.
func TestClusterSnapshotRoundTrip(t *testing.T) {
	f := parseFleet(t, sharedFleet)
	rows := NewRows(f)
	plans := []RowPlan{
		{Weights: map[string]float64{"flex-only": 0.5, "shared": 0.5}, Demand: 30},
		{Weights: map[string]float64{"long": 1}, Demand: 0},
		{Weights: map[string]float64{"shared": 0.8}, Shed: 0.2, Demand: 10},
	}
	for r := range plans {
		t0, err := Table(nil, plans[r].Weights)
		if err != nil {
			t.Fatal(err)
		}
		plans[r].Table = t0
	}
	s := ClusterSnapshot(rows, 0, plans)
	s.Version, s.Cluster = 1, "fe"
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(s.Classes) != 3 || s.Table != nil || !near(s.ShedFraction, 0.05) ||
		!near(s.Weights["shared"], 0.75*0.5+0.25*0.8) || s.Weights["long"] != 0 {
		t.Fatalf("snapshot %+v", s)
	}
	back := SnapshotRows(f, rows, 0, s)
	for r := range plans {
		if !reflect.DeepEqual(back[r].Weights, plans[r].Weights) || back[r].Shed != plans[r].Shed || back[r].Table == nil {
			t.Errorf("row %d read back as %+v", r, back[r])
		}
	}
	// An old snapshot (no classes) reads as every class, on its engines.
	old := &schemas.Snapshot{Version: 1, Cluster: "fe", Weights: map[string]float64{"flex-only": 0.5, "shared": 0.5}}
	back = SnapshotRows(f, rows, 0, old)
	if _, ok := back[1]; ok || !reflect.DeepEqual(back[2].Weights, map[string]float64{"shared": 1}) {
		t.Errorf("old snapshot read back as %+v", back)
	}
}

func TestLabel(t *testing.T) {
	f := parseFleet(t, sharedFleet)
	rows := NewRows(f)
	for _, tc := range []struct {
		engine, model string
		prompt        uint32
		want          string
	}{
		{"shared", "llama-3-8b", 10, "llama-3-8b/0-8192"},
		{"long", "llama-3-70b", 9000, "llama-3-70b/8192-inf"},
		{"flex-only", "", 10, "llama-3-70b/0-8192"}, // the engine's only model
		{"shared", "", 10, "llama-3-70b/0-8192"},    // default_model
		{"shared", "gpt-4", 10, ""},
		{"shared", "llama-3-8b", 9000, ""},
	} {
		if got := rows.Label(tc.engine, tc.model, tc.prompt); got != tc.want {
			t.Errorf("Label(%s, %q, %d) = %q, want %q", tc.engine, tc.model, tc.prompt, got, tc.want)
		}
	}
	if got := NewRows(schemas.ExampleFleetOneModel()).Label("east-h100-0", "x", 1); got != "" {
		t.Errorf("a fleet of one class labels %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { rows.Label("shared", "llama-3-8b", 10) }); n != 0 {
		t.Errorf("Label allocates %v times", n)
	}
}
