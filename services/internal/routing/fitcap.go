package routing

import "github.com/ilb-router/ilb/solver/optimize"

// FitCapacitySlack is how far above the engine model's capacity (the
// prior: the throughput of a full batch of the observed request shape,
// solver/prior) a fitted profile's capacity is believed.
const FitCapacitySlack = 1.1

// MinQueueSeen is how large a fit's queue term must be at the largest
// load it saw, as a share of its base TTFT, for a capacity below the
// prior's to be believed: below it the windows show no queueing, and the
// capacity, where the fitted queue would blow up, is an extrapolation the
// data cannot tell from any other.
const MinQueueSeen = 0.1

// CapFit returns the fitted profile fit, seen at loads up to loadMaxRPS,
// with its capacity checked against the prior's. A latency-versus-load fit
// places the capacity where its queue term would blow up; fitted on loads
// well below saturation that is an extrapolation either way:
//
//   - above FitCapacitySlack × the prior's it is capped there: on
//     chunked-prefill engines, whose TTFT stays flat until close to
//     saturation, a fit can land at twice what the engine can serve, and
//     the solver would pile traffic onto an engine it believes half empty;
//     no real engine of the fleet file's parameters exceeds the prior.
//   - below the prior's it is kept (an engine slower than its parameters
//     say) only when the windows saw queueing: the queue term at
//     loadMaxRPS at least MinQueueSeen of the base TTFT. Otherwise the
//     engine takes the prior's capacity and queue term, and the fitted
//     TBOT keeps its slope per request a second: a flat fit on light
//     loads put a test engine's capacity at 1.8 × the largest load seen
//     and 0.7 × what it serves, and the optimizer refused requests it
//     could have served (TestOptimizerAvoidsFailedEngine).
//
// A prior without capacity leaves the fit as it is.
func CapFit(fit, prior optimize.Engine, loadMaxRPS float64) optimize.Engine {
	pc := prior.CapacityRps
	switch {
	case !(pc > 0):
	case fit.CapacityRps > FitCapacitySlack*pc:
		fit.CapacityRps = FitCapacitySlack * pc
	case fit.CapacityRps > 0 && fit.CapacityRps < pc && !queueSeen(fit, loadMaxRPS):
		fit.TBOT.SlopeMs *= pc / fit.CapacityRps
		fit.CapacityRps, fit.TTFT.QueueMs = pc, prior.TTFT.QueueMs
	}
	return fit
}

// queueSeen reports whether fit's queue term at load reaches MinQueueSeen
// of its base TTFT.
func queueSeen(fit optimize.Engine, load float64) bool {
	if !(load > 0) {
		return false
	}
	if load >= fit.CapacityRps {
		return true // at or past the fitted capacity: the queue is what it saw
	}
	rho := load / fit.CapacityRps
	return fit.TTFT.QueueMs*rho/(1-rho) >= MinQueueSeen*fit.TTFT.BaseMs
}
