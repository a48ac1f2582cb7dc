package backtest

import (
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/optimize"
)

// requestShape is the mean request an estimate from the engine model is
// for.
type requestShape struct {
	promptTokens   float64
	cachedFraction float64 // of prompt tokens found in the prefix cache
	outputTokens   float64
	// uncachedSq is the mean square of the uncached prompt tokens; 0 means
	// unknown, taken as 2·mean² (as spread as an exponential).
	uncachedSq float64
}

// nominalShape is the request assumed before any has been seen.
func nominalShape(fi *fleetInfo) requestShape {
	return requestShape{promptTokens: 2048, outputTokens: fi.f.MeanOutputTokens}
}

// priorEngine is the solver profile of an engine predicted by the engine
// model from its parameters, for requests of the given shape: the prior
// of the optimizer service for an engine without a fitted profile
// (services/optimizer PriorProfile, whose derivation and checks against
// the simulated engine are there), fed with the uncached part of the mean
// prompt, except for the TTFT queue term. With prefill p = uncached
// prompt/prefill_tokens_per_s and a request's cost at a full batch
// s = p + (out−1)·step(B)/B: capacity = replicas/s; ttft = p + step(1)/2 +
// q·ρ/(1−ρ); tbot = step(1) + ¾·(step(B)/(1 − p/s) − step(1))·ρ.
//
// The queue term q differs from the service's s/(replicas·√B), which
// treats the engine as B parallel servers: prefills do not run in
// parallel (a prefill batch takes the sum of its prompts' time), so a
// request waits for the prefills ahead of it as in one M/G/1 queue, whose
// wait is ρ/(1−ρ)·E[p²]/(2·E[p]) (Pollaczek–Khinchine). With the
// heavy-tailed prompts of real traces E[p²]/(2·E[p]) is p or more, 8-16×
// the service's term; with it the solver stops loading a slow engine to
// where a 100k-token prompt queues behind another for minutes. Each
// replica is such a queue at the same ρ, so q does not shrink with
// replicas.
//
// It is copied, not shared, until it moves to solver/engine (it reads the
// fleet file's numbers, which solver/engine cannot import).
func priorEngine(name string, p engine.Params, sh requestShape) optimize.Engine {
	replicas := float64(max(p.Replicas, 1))
	batch := float64(max(p.MaxBatch, 1))
	uncached := sh.promptTokens * (1 - sh.cachedFraction)
	prefillMs := 1000*uncached/p.PrefillTokensPerS + p.PrefillOverheadMs
	fullStepMs := p.DecodeBaseMs + p.DecodePerSeqMs*batch
	oneStepMs := p.DecodeBaseMs + p.DecodePerSeqMs
	serviceMs := prefillMs + max(sh.outputTokens-1, 0)*fullStepMs/batch
	tbotFull := fullStepMs
	if serviceMs > prefillMs {
		tbotFull = fullStepMs / (1 - prefillMs/serviceMs)
	}
	sq := sh.uncachedSq
	if !(sq > 0) {
		sq = 2 * uncached * uncached
	}
	queueMs := prefillMs
	if uncached > 0 {
		queueMs = 1000 * sq / (2 * uncached * p.PrefillTokensPerS)
	}
	return optimize.Engine{
		Name:        name,
		CapacityRps: 1000 * replicas / serviceMs,
		TTFT:        optimize.TTFT{BaseMs: prefillMs + oneStepMs/2, QueueMs: queueMs},
		TBOT:        optimize.TBOT{BaseMs: oneStepMs, SlopeMs: tbotSecant * max(tbotFull-oneStepMs, 0)},
	}
}

// tbotSecant is the share of TBOT's rise to saturation that the prior's
// linear TBOT reaches at ρ = 1.
const tbotSecant = 0.75

// nominalCapacities are the engines' capacities for the nominal shape: the
// weights of capacity-proportional policies.
func nominalCapacities(fi *fleetInfo) []float64 {
	sh := nominalShape(fi)
	out := make([]float64, len(fi.engines))
	for e, p := range fi.params {
		out[e] = priorEngine(fi.engines[e], p, sh).CapacityRps
	}
	return out
}
