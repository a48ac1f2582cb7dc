package optimizer

import (
	"math"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// classesFleet: llama-3-70b on every engine, llama-3-8b on "shared" only;
// "long" alone takes prompts over 8192 tokens.
const classesFleet = `network_ms: {us: {us: 1}}
default_model: llama-3-70b
total_demand_rps: 6
clusters:
  - {name: fe, region: us, demand_share: 1, model_shares: {llama-3-70b: 2, llama-3-8b: 1}}
engines:
  - {name: flex-only, region: us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000, models: [llama-3-70b], max_context_tokens: 8192}
  - {name: shared, region: us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000, models: [llama-3-70b, llama-3-8b], max_context_tokens: 8192}
  - {name: long, region: us, sku: h100, prefill_tokens_per_s: 8700, decode_step_ms: {base: 29.6, per_seq: 0.35},
     max_batch: 64, kv_cache_tokens: 500000}
`

// classRow is a (cluster, class, engine) feature row of window k.
func classRow(k int, class, engine string, rps float64) schemas.Feature {
	r := pairRow(k, "fe", engine, rps)
	r.Class = class
	return r
}

// TestSnapshotsPerClass: in a fleet of several classes the optimizer
// estimates demand per (cluster, class) from class-labelled feature rows,
// solves the classes jointly, and publishes one snapshot per cluster
// with a class per row whose weights name only engines serving it.
func TestSnapshotsPerClass(t *testing.T) {
	f, err := schemas.ParseFleet([]byte(classesFleet))
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(testConfig(f, "classes"), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	o.in.addFeatures([]schemas.Feature{engineRow(0, "flex-only", 0), engineRow(0, "shared", 0), engineRow(0, "long", 0)})
	o.dem.update(o.in, o.rows, nil) // primes the engines' in-flight readings
	o.in.addFeatures([]schemas.Feature{
		engineRow(1, "flex-only", 2), engineRow(1, "shared", 3), engineRow(1, "long", 0.5),
		classRow(1, "llama-3-70b/0-8192", "flex-only", 2), classRow(1, "llama-3-70b/8192-inf", "long", 0.5),
		classRow(1, "llama-3-8b/0-8192", "shared", 3),
	})
	res, err := o.solve(time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	for row, want := range map[string]float64{"fe/llama-3-70b/0-8192": 2, "fe/llama-3-70b/8192-inf": 0.5, "fe/llama-3-8b/0-8192": 3} {
		if got := res.demand[row]; math.Abs(got-want) > 1e-9 {
			t.Errorf("demand of %s %v, want %v", row, got, want)
		}
	}
	snaps := res.snapshots(f)
	if len(snaps) != 1 {
		t.Fatalf("%d snapshots, want one per cluster", len(snaps))
	}
	s := snaps[0]
	s.Version = 1
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(s.Classes) != 3 || s.Table != nil {
		t.Fatalf("snapshot classes %+v, table %v", s.Classes, s.Table)
	}
	for _, k := range s.Classes {
		class := schemas.ModelClass{Model: k.Model, MinPromptTokens: k.MinPromptTokens, MaxPromptTokens: k.MaxPromptTokens}
		if k.Table == nil {
			t.Errorf("class %s has no table", class.Key())
		}
		for e, w := range k.Weights {
			fe, _ := f.Engine(e)
			if w > 0 && !f.Serves(fe, class) {
				t.Errorf("class %s weighs %s (%v), which does not serve it", class.Key(), e, w)
			}
		}
	}
	o.commit(t.Context(), res, snaps, Result{Version: 1, CreatedAt: time.Unix(100, 0)})
	if w := o.prev.solution.Weights["fe/llama-3-8b/0-8192"]; w["shared"] < 0.99 {
		t.Errorf("the anchor of the next solve reads llama-3-8b as %v", w)
	}
	if o.prev.tables["fe/llama-3-70b/8192-inf"] == nil {
		t.Error("no table kept for a row")
	}
	st := clusterStates(f, res)
	if len(st) != 3 || st[2].Cluster != "fe" || st[2].Model != "llama-3-8b" || st[2].Class != "llama-3-8b/0-8192" {
		t.Errorf("cluster states %+v", st)
	}
}
