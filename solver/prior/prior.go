package prior

import (
	"math"

	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/optimize"
)

// Shape is the mean request a prior is computed for.
type Shape struct {
	PromptTokens float64
	// CachedFraction is the share of prompt tokens found in the engine's
	// prefix cache, in [0, 1]; only the rest is prefilled.
	CachedFraction float64
	OutputTokens   float64
	// UncachedSq is the mean square of a request's uncached prompt tokens
	// (the second moment); 0 means unknown.
	UncachedSq float64
}

// tbotSecant is the share of TBOT's rise to saturation that the prior's
// linear TBOT reaches at ρ = 1 (see Profile).
const tbotSecant = 0.75

// Profile is the solver profile of an engine with parameters p for
// requests of shape sh. It reads the engine model (solver/engine:
// continuous batching, one decode step of DecodeBaseMs + DecodePerSeqMs·b
// at batch b, prefill whole or chunked as p.Scheduler says) for the mean
// request:
//
//   - prefill p = uncached prompt / PrefillTokensPerS + PrefillOverheadMs,
//     with uncached = PromptTokens·(1 − CachedFraction): the compute its
//     prompt takes, in either mode. In whole mode decoding stops while it
//     runs; in chunked mode the prompt's chunks share steps with the
//     decodes, which makes the steps longer by the same total time. So
//     capacity and mean TBOT below hold for both modes; chunked prefill
//     changes how the stall is spread over tokens (the tail), not its
//     mean.
//   - At saturation the batch is full: B = MaxBatch, or, when admission
//     reserves KV (p.KVAdmission), as many requests as KVCacheTokens
//     holds at PromptTokens + OutputTokens each, if fewer (Mooncake's
//     12,000-token prompts fill 500,000 tokens of KV at 40 requests, and
//     a prior at 64 put an h100's capacity 6% above what the engine
//     model serves, TestProfileKVLimitedBatch). One request costs
//     its prefill plus its share of the decode steps,
//     s = p + (out − 1)·step(B)/B, so capacity_rps = replicas / s.
//   - ttft.base_ms = p plus half of a batch-1 decode step (the iteration
//     under way when a request arrives at light load). In chunked mode
//     each of the prompt's ⌈uncached/MaxNumBatchedTokens⌉ steps also
//     pays the step's fixed DecodeBaseMs.
//   - ttft.queue_ms, the q of q·ρ/(1−ρ): when the second moment of the
//     uncached prompt is known, the Pollaczek–Khinchine wait of one M/G/1
//     queue of prefills, E[p²]/(2·E[p]). Prefills do not run in parallel
//     (a prefill iteration takes the sum of its prompts' time), so a
//     request waits for the prefills ahead of it; with the heavy-tailed
//     prompts of real traces this is p or more. Each replica is such a
//     queue at the same ρ, so q does not shrink with replicas. Without
//     the second moment, q = s/(replicas·√B), the M/M/c wait of B slots
//     per replica near saturation (square-root staffing), which matches
//     the engine model within 40% for prompts of one size (the optimizer
//     service's prior_test.go) but is 8-16× too small for heavy-tailed
//     ones.
//   - tbot.base_ms = one decode step at batch 1. At saturation TBOT is a
//     step at B stretched by the share of time prefills take then (p/s).
//     The simulated TBOT rises convexly towards it, so the line takes 3/4
//     of that rise as tbot.slope_ms: within about 20% of the engine model
//     for ρ from 0.2 to 0.95 on both calibrated SKUs, where the full rise
//     overshoots mid-range loads by up to 45%.
func Profile(name string, p engine.Params, sh Shape) optimize.Engine {
	replicas := float64(max(p.Replicas, 1))
	batch := fullBatch(p, sh)
	uncached := sh.PromptTokens * (1 - sh.CachedFraction)
	prefillMs := 1000*uncached/p.PrefillTokensPerS + p.PrefillOverheadMs
	fullStepMs := p.DecodeBaseMs + p.DecodePerSeqMs*batch
	oneStepMs := p.DecodeBaseMs + p.DecodePerSeqMs
	serviceMs := prefillMs + max(sh.OutputTokens-1, 0)*fullStepMs/batch
	tbotFull := fullStepMs
	if serviceMs > prefillMs { // one-token outputs: decoding never runs
		tbotFull = fullStepMs / (1 - prefillMs/serviceMs)
	}
	return optimize.Engine{
		Name:        name,
		CapacityRps: 1000 * replicas / serviceMs,
		TTFT: optimize.TTFT{BaseMs: prefillMs + chunkBaseMs(p, uncached) + oneStepMs/2,
			QueueMs: queueMs(p, sh, uncached, prefillMs, serviceMs, replicas, batch)},
		TBOT: optimize.TBOT{BaseMs: oneStepMs, SlopeMs: tbotSecant * max(tbotFull-oneStepMs, 0)},
	}
}

// queueMs is the q of the TTFT queue term (see Profile).
func queueMs(p engine.Params, sh Shape, uncached, prefillMs, serviceMs, replicas, batch float64) float64 {
	switch {
	case !(sh.UncachedSq > 0):
		return serviceMs / (replicas * math.Sqrt(batch))
	case uncached > 0:
		return 1000 * sh.UncachedSq / (2 * uncached * p.PrefillTokensPerS)
	}
	return prefillMs
}

// chunkBaseMs is the fixed step cost a prompt of uncached tokens pays in
// chunked mode: DecodeBaseMs for each of its steps (at least one); 0 in
// whole mode.
func chunkBaseMs(p engine.Params, uncached float64) float64 {
	if p.Scheduler != engine.SchedulerChunked || p.MaxNumBatchedTokens <= 0 {
		return 0
	}
	return math.Max(1, math.Ceil(uncached/float64(p.MaxNumBatchedTokens))) * p.DecodeBaseMs
}

// fullBatch is the batch at saturation: MaxBatch, or the requests of
// shape sh whose KV reservations (prompt + output tokens each) fill
// KVCacheTokens when admission reserves KV, if fewer; at least 1.
func fullBatch(p engine.Params, sh Shape) float64 {
	b := float64(max(p.MaxBatch, 1))
	if perRequest := sh.PromptTokens + sh.OutputTokens; p.KVAdmission && p.KVCacheTokens > 0 && perRequest > 0 {
		b = min(b, max(float64(p.KVCacheTokens)/perRequest, 1))
	}
	return b
}
