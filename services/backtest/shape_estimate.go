package backtest

import (
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/prior"
)

// shapeEstimate tracks the mean request of recent completions: prompt and
// output tokens, the share of prompt tokens found in cache, and the mean
// square of the uncached prompt tokens, the shape solver/prior sizes an
// engine's prior for. (The aggregator's features carry the cache hit
// ratio but not the token counts; an optimizer needs them for its prior,
// so the backtester reads them from the completion events it already
// produces. The optimizer service, without them, sizes its prior from its
// configured mean prompt and no second moment.)
type shapeEstimate struct {
	alpha                  float64 // weight of the newest control interval
	fallback               prior.Shape
	cur                    prior.Shape
	known                  bool
	n                      float64
	prompt, cached, output float64
	uncachedSq             float64 // Σ (prompt − cached)²
}

func (se *shapeEstimate) observe(d *engine.Done) {
	if d.Error != "" {
		return
	}
	se.n++
	se.prompt += float64(d.PromptTokens)
	se.cached += float64(d.CachedTokens)
	se.output += float64(d.OutputTokens)
	u := float64(d.PromptTokens - d.CachedTokens)
	se.uncachedSq += u * u
}

// roll folds the completions since the last call into the estimate.
func (se *shapeEstimate) roll() {
	if se.n == 0 {
		return
	}
	now := prior.Shape{PromptTokens: se.prompt / se.n, OutputTokens: se.output / se.n,
		CachedFraction: ratio(se.cached, se.prompt), UncachedSq: se.uncachedSq / se.n}
	if !se.known {
		se.cur, se.known = now, true
	} else {
		a := se.alpha
		se.cur.PromptTokens = a*now.PromptTokens + (1-a)*se.cur.PromptTokens
		se.cur.OutputTokens = a*now.OutputTokens + (1-a)*se.cur.OutputTokens
		se.cur.CachedFraction = a*now.CachedFraction + (1-a)*se.cur.CachedFraction
		se.cur.UncachedSq = a*now.UncachedSq + (1-a)*se.cur.UncachedSq
	}
	se.n, se.prompt, se.cached, se.output, se.uncachedSq = 0, 0, 0, 0, 0
}

func (se *shapeEstimate) get() prior.Shape {
	if se.known {
		return se.cur
	}
	return se.fallback
}
