package routing

import "github.com/ilb-router/ilb/solver/optimize"

// FitCapacitySlack is how far above the engine model's capacity (the
// prior: the throughput of a full batch of the observed request shape,
// solver/prior) a fitted profile's capacity is believed.
const FitCapacitySlack = 1.1

// CapFit returns the fitted profile fit with its capacity capped at
// FitCapacitySlack × the prior's. A latency-versus-load fit places the
// capacity where its queue term would blow up; fitted on loads well below
// saturation that is an extrapolation, and on chunked-prefill engines,
// whose TTFT stays flat until close to saturation, it can land at twice
// what the engine can serve: the solver would then pile traffic onto an
// engine it believes half empty. The prior cannot be exceeded by a real
// engine of the fleet file's parameters, while a fit below it (an engine
// slower than its parameters say) is kept. A prior without capacity
// leaves the fit as it is.
func CapFit(fit, prior optimize.Engine) optimize.Engine {
	if prior.CapacityRps > 0 && fit.CapacityRps > FitCapacitySlack*prior.CapacityRps {
		fit.CapacityRps = FitCapacitySlack * prior.CapacityRps
	}
	return fit
}
