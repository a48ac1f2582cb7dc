package backtest

import "github.com/ilb-router/ilb/solver/engine"

// shapeEstimate tracks the mean request of recent completions: prompt and
// output tokens, the share of prompt tokens found in cache, and the mean
// square of the uncached prompt tokens. (The
// aggregator's features carry the cache hit ratio but not the token
// counts; an optimizer needs them for its prior, so the backtester reads
// them from the completion events it already produces.)
type shapeEstimate struct {
	alpha                  float64 // weight of the newest control interval
	fallback               requestShape
	cur                    requestShape
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
	now := requestShape{promptTokens: se.prompt / se.n, outputTokens: se.output / se.n,
		cachedFraction: ratio(se.cached, se.prompt), uncachedSq: se.uncachedSq / se.n}
	if !se.known {
		se.cur, se.known = now, true
	} else {
		a := se.alpha
		se.cur.promptTokens = a*now.promptTokens + (1-a)*se.cur.promptTokens
		se.cur.outputTokens = a*now.outputTokens + (1-a)*se.cur.outputTokens
		se.cur.cachedFraction = a*now.cachedFraction + (1-a)*se.cur.cachedFraction
		se.cur.uncachedSq = a*now.uncachedSq + (1-a)*se.cur.uncachedSq
	}
	se.n, se.prompt, se.cached, se.output, se.uncachedSq = 0, 0, 0, 0, 0
}

func (se *shapeEstimate) get() requestShape {
	if se.known {
		return se.cur
	}
	return se.fallback
}
