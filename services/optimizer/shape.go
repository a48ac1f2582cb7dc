package optimizer

import (
	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/prior"
)

// shape is the mean request the engines serve, which sizes the prior
// profile of every engine without a fit and caps the fits
// (routing.CapFit): prior.ShapeEstimate, the rule the backtester runs,
// fed with each engine-level feature row once (its request shape
// columns: prompt_tokens_mean, output_tokens_mean, uncached_sq_mean, and
// cache_hit_ratio) and rolled once per solve. Before any row with a
// shape (and with rows of aggregators older than those columns), the
// prior is sized for Config.MeanPromptTokens uncached prompt tokens and
// the fleet's mean_output_tokens, as before.
type shape struct {
	est  prior.ShapeEstimate
	seen map[string]int64 // engine -> window end of the last row taken
}

func newShape(alpha, outputAlpha, meanPrompt float64, f *schemas.Fleet) *shape {
	return &shape{est: prior.ShapeEstimate{Alpha: alpha, OutputAlpha: outputAlpha,
		Fallback: prior.Shape{PromptTokens: meanPrompt, OutputTokens: f.MeanOutputTokens}},
		seen: map[string]int64{}}
}

// update takes the engine rows not taken yet and rolls the estimate. A
// row of n completions without error adds n requests of its means.
func (s *shape) update(in *inputs) {
	for _, fe := range in.fleet.Engines {
		r, ok := in.engines[fe.Name]
		if !ok || r.WindowEndUnixNano <= s.seen[fe.Name] {
			continue
		}
		s.seen[fe.Name] = r.WindowEndUnixNano
		n := float64(r.Requests - r.Errors)
		if !(r.PromptTokensMean > 0) || !(n > 0) {
			continue // no completion, or a writer without the shape columns
		}
		prompt := r.PromptTokensMean * n
		s.est.Observe(n, prompt, r.CacheHitRatio*prompt, r.OutputTokensMean*n, r.UncachedSqMean*n)
	}
	s.est.Roll()
}

// setFleet drops engines the fleet no longer has, and takes its
// mean_output_tokens for the prior before any row (as PriorProfile read
// it from the fleet in use).
func (s *shape) setFleet(f *schemas.Fleet) {
	s.est.Fallback.OutputTokens = f.MeanOutputTokens
	for name := range s.seen {
		if _, ok := f.Engine(name); !ok {
			delete(s.seen, name)
		}
	}
}

func (s *shape) get() prior.Shape { return s.est.Get() }
