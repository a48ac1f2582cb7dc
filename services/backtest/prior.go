package backtest

import "github.com/ilb-router/ilb/solver/prior"

// nominalPromptTokens is the mean prompt assumed before any request has
// been seen.
const nominalPromptTokens = 2048

// nominalShape is the request assumed before any has been seen: a
// 2048-token prompt, nothing cached, the fleet's mean output, and prompt
// sizes as spread as an exponential's (E[p²] = 2·E[p]²), so the prior
// takes the Pollaczek–Khinchine queue term (solver/prior) from the start.
func nominalShape(fi *fleetInfo) prior.Shape {
	return prior.Shape{PromptTokens: nominalPromptTokens, OutputTokens: fi.f.MeanOutputTokens,
		UncachedSq: 2 * nominalPromptTokens * nominalPromptTokens}
}

// nominalCapacities are the engines' capacities for the nominal shape
// (solver/prior, the optimizer service's prior): the weights of
// capacity-proportional policies.
func nominalCapacities(fi *fleetInfo) []float64 {
	sh := nominalShape(fi)
	out := make([]float64, len(fi.engines))
	for e, p := range fi.params {
		out[e] = prior.Profile(fi.engines[e], p, sh).CapacityRps
	}
	return out
}
