package optimizer

import (
	"math"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
)

// PriorProfile estimates an engine's latency-versus-load profile from its
// fleet-file parameters, for an engine the aggregator has not fitted yet
// (a cold start). It reads the engine model of DESIGN.md (continuous
// batching without chunked prefill, one decode step of
// base + per_seq·b ms at batch b) for requests of meanPromptTokens
// uncached prompt tokens and meanOutputTokens output tokens:
//
//   - prefill = prompt / prefill_tokens_per_s; while it runs, decoding
//     stops.
//   - At saturation the batch is full (max_batch): one request costs its
//     prefill plus its share of the decode steps,
//     s = prefill + output·(base + per_seq·max_batch)/max_batch, so
//     capacity_rps = replicas / s.
//   - ttft.base_ms = prefill plus half of a batch-1 decode step (the
//     iteration under way when a request arrives at light load);
//     ttft.queue_ms = s / (replicas·√max_batch). A batching engine is a
//     many-server queue (max_batch slots per replica), and the wait in an
//     M/M/c queue near saturation shrinks like 1/√c (square-root staffing);
//     one M/M/1 server of rate capacity_rps (queue_ms = s/replicas) waits
//     5-8 times longer than the simulated engine does at ρ = 0.5-0.85.
//   - tbot.base_ms = one decode step at batch 1. At saturation TBOT is a
//     step at max_batch stretched by the share of time prefills take then
//     (prefill/s). The simulated TBOT rises convexly towards it, so the
//     line takes 3/4 of that rise as tbot.slope_ms: it then stays within
//     about 20% of the simulation for ρ from 0.2 to 0.95 on both example
//     SKUs, where the full rise overshoots mid-range loads by up to 45%.
//
// prior_test.go checks these against the simulated engine (solver/engine)
// and against the example fleet's sizing. The function is pure; it belongs
// in solver/engine, next to the model it reads, where the backtester can
// share it.
// tbotSecant is the share of TBOT's rise to saturation that the prior's
// linear TBOT reaches at ρ = 1 (see PriorProfile).
const tbotSecant = 0.75

func PriorProfile(e schemas.FleetEngine, meanPromptTokens, meanOutputTokens float64) optimize.Engine {
	replicas := float64(max(e.Replicas, 1))
	batch := float64(max(e.MaxBatch, 1))
	prefillMs := 1000 * meanPromptTokens / e.PrefillTokensPerS
	fullStepMs := e.DecodeStepMs.Base + e.DecodeStepMs.PerSeq*batch
	oneStepMs := e.DecodeStepMs.Base + e.DecodeStepMs.PerSeq
	serviceMs := prefillMs + max(meanOutputTokens-1, 0)*fullStepMs/batch
	tbotFull := fullStepMs / (1 - prefillMs/serviceMs)
	if !(serviceMs > prefillMs) { // one-token outputs: decoding never runs
		tbotFull = fullStepMs
	}
	return optimize.Engine{
		Name:        e.Name,
		CapacityRps: 1000 * replicas / serviceMs,
		TTFT:        optimize.TTFT{BaseMs: prefillMs + oneStepMs/2, QueueMs: serviceMs / (replicas * math.Sqrt(batch))},
		TBOT:        optimize.TBOT{BaseMs: oneStepMs, SlopeMs: tbotSecant * max(tbotFull-oneStepMs, 0)},
	}
}
