package optimize

// MaxPredictUtilization caps the utilisation Predict evaluates the TTFT
// curve at: at or past capacity the queue term has no finite value, and a
// prediction is still wanted (a large, finite one).
const MaxPredictUtilization = 0.99

// Predict returns the engine's modelled TTFT and TBOT, in ms, at a load
// of loadRPS: ttft = base + queue·ρ/(1−ρ), tbot = base + slope·ρ with
// ρ = load/capacity capped at MaxPredictUtilization (the model of
// DESIGN.md, without the network). An engine without capacity predicts
// its base latencies.
func (e Engine) Predict(loadRPS float64) (ttftMs, tbotMs float64) {
	rho := 0.0
	if e.CapacityRps > 0 && loadRPS > 0 {
		rho = min(loadRPS/e.CapacityRps, MaxPredictUtilization)
	}
	return e.TTFT.BaseMs + e.TTFT.QueueMs*rho/(1-rho), e.TBOT.BaseMs + e.TBOT.SlopeMs*rho
}
