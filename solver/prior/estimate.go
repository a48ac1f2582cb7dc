package prior

// ShapeEstimate tracks the mean request of recent completions, the Shape
// Profile sizes an engine's prior for: prompt and output tokens, the share
// of prompt tokens found in cache, and the mean square of the uncached
// prompt tokens. Completions are added as sums (Observe) and folded into
// an exponential moving average once per control interval (Roll), so the
// capacity the prior gives follows the requests actually served. The
// optimizer service feeds it from the feature windows, the backtester
// from its completions; both roll it once per solve.
type ShapeEstimate struct {
	// Alpha is the weight of the newest interval, in (0, 1], in the
	// prompt, its cached share and its second moment.
	Alpha float64
	// OutputAlpha is the same for the output tokens; 0 means Alpha.
	OutputAlpha float64
	// Fallback is the shape before any completion was seen.
	Fallback Shape

	cur                    Shape
	known                  bool
	n                      float64
	prompt, cached, output float64
	uncachedSq             float64 // Σ (prompt − cached)²
}

// Observe adds n completions whose prompt, cached prompt and output tokens
// sum to prompt, cached and output, and whose uncached prompt tokens
// squared sum to uncachedSq.
func (se *ShapeEstimate) Observe(n, prompt, cached, output, uncachedSq float64) {
	if !(n > 0) {
		return
	}
	se.n += n
	se.prompt += prompt
	se.cached += cached
	se.output += output
	se.uncachedSq += uncachedSq
}

// Roll folds the completions observed since the last call into the
// estimate; an interval without any leaves it as it was.
func (se *ShapeEstimate) Roll() {
	if se.n == 0 {
		return
	}
	cf := 0.0
	if se.prompt != 0 {
		cf = se.cached / se.prompt
	}
	now := Shape{PromptTokens: se.prompt / se.n, OutputTokens: se.output / se.n,
		CachedFraction: cf, UncachedSq: se.uncachedSq / se.n}
	if !se.known {
		se.cur, se.known = now, true
	} else {
		a := se.Alpha
		se.cur.PromptTokens = a*now.PromptTokens + (1-a)*se.cur.PromptTokens
		ao := se.OutputAlpha
		if ao == 0 {
			ao = a
		}
		se.cur.OutputTokens = ao*now.OutputTokens + (1-ao)*se.cur.OutputTokens
		se.cur.CachedFraction = a*now.CachedFraction + (1-a)*se.cur.CachedFraction
		se.cur.UncachedSq = a*now.UncachedSq + (1-a)*se.cur.UncachedSq
	}
	se.n, se.prompt, se.cached, se.output, se.uncachedSq = 0, 0, 0, 0, 0
}

// Get returns the estimate, or Fallback before any completion.
func (se *ShapeEstimate) Get() Shape {
	if se.known {
		return se.cur
	}
	return se.Fallback
}

// Known reports whether any completion has been folded in.
func (se *ShapeEstimate) Known() bool { return se.known }
