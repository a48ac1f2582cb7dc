package optimizer

import (
	"cmp"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/prior"
)

// PriorProfile estimates an engine's latency-versus-load profile from its
// fleet-file parameters, for an engine the aggregator has not fitted yet
// (a cold start): solver/prior's Profile, which the backtester runs too,
// for requests of meanPromptTokens uncached prompt tokens and
// meanOutputTokens output tokens, with no second moment of them (the M/M/c
// queue term; solver/prior explains both): the optimizer's prior before
// the feature windows report the mean request (PriorProfileFor).
// prior_test.go checks the result against the simulated engine and the
// example fleet's sizing.
func PriorProfile(e schemas.FleetEngine, meanPromptTokens, meanOutputTokens float64) optimize.Engine {
	return PriorProfileFor(e, prior.Shape{PromptTokens: meanPromptTokens, OutputTokens: meanOutputTokens})
}

// PriorProfileFor is PriorProfile for requests of shape sh: the mean
// request the feature windows report (prompt and output tokens, cached
// share, second moment of the uncached prompt), which the optimizer
// estimates as the backtester does (shape.go).
func PriorProfileFor(e schemas.FleetEngine, sh prior.Shape) optimize.Engine {
	p := engine.Params{
		PrefillTokensPerS: e.PrefillTokensPerS,
		DecodeBaseMs:      e.DecodeStepMs.Base,
		DecodePerSeqMs:    e.DecodeStepMs.PerSeq,
		MaxBatch:          e.MaxBatch,
		Replicas:          e.Replicas,
	}
	// The prior follows the engine's scheduler (an unparsed fleet's empty
	// one is the default); in chunked mode WithDefaults fills the SKU's
	// token budget when the fleet gives none.
	if s, err := engine.ParseScheduler(cmp.Or(e.Scheduler, schemas.DefaultScheduler)); err == nil && s == engine.SchedulerChunked {
		p.Scheduler, p.MaxNumBatchedTokens = s, e.MaxNumBatchedTokens
		p, _ = p.WithDefaults(e.SKU)
	}
	return prior.Profile(e.Name, p, sh)
}
