package optimizer

import (
	"math"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/prior"
)

// TestShapeSizesThePrior: the mean request of the feature windows sizes
// the priors (the backtester's rule, prior.ShapeEstimate): before any row,
// and with rows of an aggregator without the shape columns, the prior is
// the configured MeanPromptTokens one; rows of long prompts lower every
// engine's prior capacity; a row is taken once however many solves see
// it, and the estimate moves by ShapeAlpha per solve.
func TestShapeSizesThePrior(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	cfg := DefaultConfig(f)
	in := newInputs(f)
	sh := newShape(cfg.ShapeAlpha, cfg.ShapeOutputAlpha, cfg.MeanPromptTokens, f)
	e := f.Engines[0]
	fallback := PriorProfile(e, cfg.MeanPromptTokens, f.MeanOutputTokens).CapacityRps
	capNow := func() float64 { return derate(cfg.Derate, in, sh.get())[0].profile.engine.CapacityRps }

	row := func(end int64, prompt float64) []schemas.Feature {
		var rows []schemas.Feature
		for _, fe := range f.Engines {
			rows = append(rows, schemas.Feature{WindowStartUnixNano: end - 10e9, WindowEndUnixNano: end, Engine: fe.Name,
				Requests: 10, ArrivalRPS: 1, Healthy: true, ReadyReplicas: 1, StatusEvents: 1,
				CacheHitRatio: 0.25, PromptTokensMean: prompt, OutputTokensMean: 300, UncachedSqMean: prompt * prompt * 0.75 * 0.75})
		}
		return rows
	}
	sh.update(in)
	if got := capNow(); got != fallback {
		t.Fatalf("before any row: capacity %v, want the MeanPromptTokens prior's %v", got, fallback)
	}
	old := row(10e9, 0) // an aggregator without the shape columns
	in.addFeatures(old)
	sh.update(in)
	if got := capNow(); got != fallback || sh.est.Known() {
		t.Fatalf("rows without a shape: capacity %v (want %v), known %v", got, fallback, sh.est.Known())
	}
	in.addFeatures(row(20e9, 12000))
	sh.update(in)
	want := prior.Shape{PromptTokens: 12000, CachedFraction: 0.25, OutputTokens: 300, UncachedSq: 9000 * 9000}
	if got := sh.get(); math.Abs(got.PromptTokens-want.PromptTokens) > 1e-9 || math.Abs(got.CachedFraction-want.CachedFraction) > 1e-12 ||
		got.OutputTokens != want.OutputTokens || math.Abs(got.UncachedSq-want.UncachedSq) > 1e-3 {
		t.Fatalf("after one window of 12k-token prompts: %+v, want %+v", got, want)
	}
	long := capNow()
	if !(long < fallback/4) {
		t.Fatalf("12k-token prompts (9k uncached): prior capacity %v, want far below the 1k-token prior's %v", long, fallback)
	}
	if got, want := long, PriorProfileFor(e, want).CapacityRps; math.Abs(got-want) > 1e-9*want {
		t.Fatalf("capacity %v, want PriorProfileFor's %v", got, want)
	}
	sh.update(in) // the same windows again: nothing new
	if got := sh.get().PromptTokens; math.Abs(got-12000) > 1e-9 {
		t.Fatalf("a row counted twice: prompt %v", got)
	}
	in.addFeatures(row(30e9, 2000))
	sh.update(in)
	if a := cfg.ShapeAlpha; a != 0.7 {
		t.Fatalf("default ShapeAlpha %v, want 0.7", a)
	}
	if got, want := sh.get().PromptTokens, 0.7*2000+0.3*12000; math.Abs(got-want) > 1e-9 {
		t.Fatalf("after a window of 2k-token prompts: %v, want %v (ShapeAlpha 0.7)", got, want)
	}
	// A fleet reload's mean_output_tokens sizes the prior until a row
	// reports the mean request.
	g := schemas.ExampleFleetOneModel()
	g.MeanOutputTokens = 2 * f.MeanOutputTokens
	fresh := newShape(cfg.ShapeAlpha, cfg.ShapeOutputAlpha, cfg.MeanPromptTokens, f)
	fresh.setFleet(g)
	if got := fresh.get().OutputTokens; got != g.MeanOutputTokens {
		t.Fatalf("after a fleet reload: output tokens %v, want the new fleet's %v", got, g.MeanOutputTokens)
	}
	bad := DefaultConfig(f)
	bad.ShapeAlpha = 0
	if err := bad.Validate(); err == nil {
		t.Fatal("shape alpha 0 accepted")
	}
	bad = DefaultConfig(f)
	bad.ShapeOutputAlpha = 1.5
	if err := bad.Validate(); err == nil {
		t.Fatal("shape output alpha 1.5 accepted")
	}
}
