package backtest

import (
	"math"
	"slices"

	"github.com/ilb-router/ilb/solver/engine"

	"github.com/ilb-router/ilb/solver/optimize"
)

// EngineCalibration compares, for one engine, what the optimizer's model
// predicted with what the simulated engine did: the model's calibration
// error, so that a wrong capacity or latency model is visible. Latencies
// are request-weighted means over the requests the engine served, each
// predicted by the profile in force when it arrived at the engine's load
// over that solve interval (its arrivals per second); TTFT without the
// network time.
type EngineCalibration struct {
	Name            string  `json:"name"`
	Requests        int     `json:"requests"`
	PredictedTTFTMs float64 `json:"predicted_ttft_ms"`
	ObservedTTFTMs  float64 `json:"observed_ttft_ms"`
	PredictedTBOTMs float64 `json:"predicted_tbot_ms"`
	ObservedTBOTMs  float64 `json:"observed_tbot_ms"`
	// ModelCapacityRPS is the time-weighted mean of the profiles'
	// capacity; MeasuredCapacityRPS is the engine model's throughput when
	// saturated with a sample of this trace's requests (measureCapacity).
	ModelCapacityRPS    float64 `json:"model_capacity_rps"`
	MeasuredCapacityRPS float64 `json:"measured_capacity_rps"`
	CapacityErrorRatio  float64 `json:"capacity_error_ratio"` // model / measured − 1
	MeanLoadRPS         float64 `json:"mean_load_rps"`        // requests routed to it per second of the run
	TTFTErrorRatio      float64 `json:"ttft_error_ratio"`     // predicted / observed − 1
	TBOTErrorRatio      float64 `json:"tbot_error_ratio"`     // predicted / observed − 1
}

// calibrator keeps the profiles each solve of the optimizer policy used.
type calibrator struct {
	at       []int64           // solve times, ascending
	profiles [][]solvedProfile // by solve, by engine index (zero: not in the problem)
	ne       int
}

// solvedProfile is what the calibration reads of an engine's profile in a
// solve. It holds no pointers (optimize.Engine has its name and models),
// so the run's history of them, a row per solve, is not scanned by the
// collector.
type solvedProfile struct {
	CapacityRps float64
	TTFT        optimize.TTFT
	TBOT        optimize.TBOT
}

func (c *calibrator) record(now int64, fi *fleetInfo, p *optimize.Problem) {
	row := make([]solvedProfile, c.ne)
	for _, e := range p.Engines {
		if i, ok := fi.engineIndex(e.Name); ok {
			row[i] = solvedProfile{CapacityRps: e.CapacityRps, TTFT: e.TTFT, TBOT: e.TBOT}
		}
	}
	c.at, c.profiles = append(c.at, now), append(c.profiles, row)
}

// calibrate computes every engine's calibration from the run's outcomes.
func (c *calibrator) calibrate(r *recorder, endNs int64) []EngineCalibration {
	if len(c.at) == 0 {
		return nil
	}
	o, w, fi := r.out, r.w, r.fi
	n := len(c.at)
	count := make([][]int, n) // [interval][engine]: requests routed
	for k := range count {
		count[k] = make([]int, c.ne)
	}
	interval := func(t int64) int {
		k, _ := slices.BinarySearch(c.at, t+1)
		return max(k-1, 0)
	}
	for i := range w.len() {
		if e := o.engine[i]; e >= 0 {
			count[interval(w.arrival[i])][e]++
		}
	}
	span := func(k int) float64 {
		end := endNs
		if k+1 < n {
			end = c.at[k+1]
		}
		return max(float64(end-c.at[k])/1e9, 1e-9)
	}
	load := c.smoothedLoad(count, span)
	// Engines of the same parameters measure the same: once each.
	byParams := map[engine.Params]float64{}
	measured := func(p engine.Params) float64 {
		v, ok := byParams[p]
		if !ok {
			v = measureCapacityWith(&fi.pool, p, w)
			byParams[p] = v
		}
		return v
	}
	out := make([]EngineCalibration, c.ne)
	for e := range out {
		out[e].Name = fi.engines[e]
	}
	for i := range w.len() {
		if o.kind[i] != outServed {
			continue
		}
		e, k := int(o.engine[i]), interval(w.arrival[i])
		prof := c.profiles[k][e]
		if !(prof.CapacityRps > 0) {
			continue
		}
		rho := min(load[k][e]/prof.CapacityRps, 0.99)
		cal := &out[e]
		cal.Requests++
		cal.PredictedTTFTMs += prof.TTFT.BaseMs + prof.TTFT.QueueMs*rho/(1-rho)
		cal.ObservedTTFTMs += o.ttft[i] - fi.net[w.row[i]][e]
		cal.PredictedTBOTMs += prof.TBOT.BaseMs + prof.TBOT.SlopeMs*rho
		cal.ObservedTBOTMs += o.tbot[i]
	}
	total := float64(endNs-c.at[0]) / 1e9
	for e := range out {
		cal := &out[e]
		if cal.Requests > 0 {
			m := float64(cal.Requests)
			cal.PredictedTTFTMs, cal.ObservedTTFTMs = cal.PredictedTTFTMs/m, cal.ObservedTTFTMs/m
			cal.PredictedTBOTMs, cal.ObservedTBOTMs = cal.PredictedTBOTMs/m, cal.ObservedTBOTMs/m
			cal.TTFTErrorRatio = ratioMinusOne(cal.PredictedTTFTMs, cal.ObservedTTFTMs)
			cal.TBOTErrorRatio = ratioMinusOne(cal.PredictedTBOTMs, cal.ObservedTBOTMs)
		}
		routed := 0
		for k := range n {
			cal.ModelCapacityRPS += c.profiles[k][e].CapacityRps * span(k)
			routed += count[k][e]
		}
		cal.ModelCapacityRPS /= max(total, 1e-9)
		cal.MeasuredCapacityRPS = measured(fi.params[e])
		cal.CapacityErrorRatio = ratioMinusOne(cal.ModelCapacityRPS, cal.MeasuredCapacityRPS)
		cal.MeanLoadRPS = float64(routed) / max(total, 1e-9)
	}
	return out
}

// loadSmoothing is the span over which an engine's arrivals are averaged
// into the load a prediction is made at: a few seconds of Poisson
// arrivals are too noisy for a convex latency curve.
const loadSmoothing = 60e9

// smoothedLoad is each engine's arrival rate over the loadSmoothing
// centred on each solve interval.
func (c *calibrator) smoothedLoad(count [][]int, span func(int) float64) [][]float64 {
	out := make([][]float64, len(count))
	for k := range count {
		out[k] = make([]float64, c.ne)
		lo, _ := slices.BinarySearch(c.at, c.at[k]-loadSmoothing/2)
		hi, _ := slices.BinarySearch(c.at, c.at[k]+loadSmoothing/2)
		hi = max(hi, k+1)
		secs := 0.0
		for j := lo; j < hi; j++ {
			secs += span(j)
			for e := range c.ne {
				out[k][e] += float64(count[j][e])
			}
		}
		for e := range c.ne {
			out[k][e] /= secs
		}
	}
	return out
}

// ratioMinusOne is the relative error of pred against obs (0 when nothing
// was observed).
func ratioMinusOne(pred, obs float64) float64 {
	if !(obs > 0) || math.IsInf(pred, 0) {
		return 0
	}
	return pred/obs - 1
}
