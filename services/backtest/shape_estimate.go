package backtest

import (
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/prior"
)

// shapeEstimate feeds prior.ShapeEstimate (the optimizer service's rule)
// with the simulated completions: the mean request of recent completions,
// the shape solver/prior sizes an engine's prior for. The service reads
// the same sums from the feature windows (their prompt_tokens_mean,
// output_tokens_mean, uncached_sq_mean and cache_hit_ratio columns); the
// backtester reads them from the completion events it already produces,
// up to each control tick.
type shapeEstimate struct {
	prior.ShapeEstimate
}

func (se *shapeEstimate) observe(d *engine.Done) {
	if d.Error != "" {
		return
	}
	u := float64(d.PromptTokens - d.CachedTokens)
	se.Observe(1, float64(d.PromptTokens), float64(d.CachedTokens), float64(d.OutputTokens), u*u)
}
