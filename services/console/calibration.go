package console

import (
	"time"

	"github.com/ilb-router/ilb/solver/optimize"
)

// CalibrationWindow is how much of the engines' recent feature windows
// the calibration averages: single windows of a few requests are too
// noisy to judge a latency model by.
const CalibrationWindow = time.Minute

// CalibrationTolerance is the relative error beyond which the page marks
// a prediction off.
const CalibrationTolerance = 0.5

// Calibration compares, for one engine, the optimizer's model with what
// the engine did over the last CalibrationWindow of feature windows (the
// aggregator's, measured at the engine, no network). Latencies are the
// request-weighted mean of the windows' medians: the statistic the
// aggregator fits the profiles to (solver/regress). Predictions are at
// the observed load, so a latency error is the model's, not the plan's
// (as the backtester's calibration does); the prediction at the planned
// load is given too. Errors are predicted / observed − 1, nil when
// nothing was observed.
type Calibration struct {
	Profile         string   `json:"profile,omitempty"` // fitted, sku or prior
	CapacityRPS     float64  `json:"capacity_rps"`
	PlannedLoadRPS  float64  `json:"planned_load_rps"`
	ObservedLoadRPS float64  `json:"observed_load_rps"`
	LoadError       *float64 `json:"load_error"` // planned / observed − 1
	PredictedTTFTMs float64  `json:"predicted_ttft_ms"`
	ObservedTTFTMs  float64  `json:"observed_ttft_ms"`
	TTFTError       *float64 `json:"ttft_error"`
	PredictedTBOTMs float64  `json:"predicted_tbot_ms"`
	ObservedTBOTMs  float64  `json:"observed_tbot_ms"`
	TBOTError       *float64 `json:"tbot_error"`
	PlannedTTFTMs   float64  `json:"planned_ttft_ms"` // at the planned load
	PlannedTBOTMs   float64  `json:"planned_tbot_ms"`
	Windows         int      `json:"windows"`
	Requests        int64    `json:"requests"`
	// Off names what is off by more than CalibrationTolerance: "load",
	// "ttft", "tbot".
	Off []string `json:"off,omitempty"`
}

// engineWindow is one feature window of one engine.
type engineWindow struct {
	end        time.Time
	requests   int64
	load       float64
	ttft, tbot float64 // medians, ms
}

// maxCalibrationWindows bounds the windows kept per engine, whatever the
// aggregator's window length.
const maxCalibrationWindows = 120

// observeWindows keeps each engine's feature windows of the last
// CalibrationWindow, one entry per window end.
func (c *Console) observeWindows(st *State) {
	if c.windows == nil {
		c.windows = map[string][]engineWindow{}
	}
	for _, e := range st.Engines {
		s := e.Stats
		if s == nil || s.WindowEnd.IsZero() {
			continue
		}
		ws := c.windows[e.Name]
		if n := len(ws); n > 0 && !s.WindowEnd.After(ws[n-1].end) {
			continue // a window already kept, carried or repeated
		}
		ws = append(ws, engineWindow{end: s.WindowEnd, requests: s.Requests, load: s.LoadRPS, ttft: s.TTFTP50Ms, tbot: s.TBOTP50Ms})
		cut := 0
		for cut < len(ws) && (len(ws)-cut > maxCalibrationWindows || !ws[cut].end.After(s.WindowEnd.Add(-CalibrationWindow))) {
			cut++
		}
		c.windows[e.Name] = append(ws[:0:0], ws[cut:]...)
	}
}

// calibrate sets each engine's plan and calibration from the plan's
// engines and the kept windows.
func (c *Console) calibrate(st *State, plan *Plan) {
	if plan == nil {
		return
	}
	for i := range plan.Engines {
		pe := &plan.Engines[i]
		for j := range st.Engines {
			if e := &st.Engines[j]; e.Name == pe.Name {
				e.Plan = pe
				e.Calibration = calibration(pe, c.windows[e.Name])
			}
		}
	}
}

func calibration(pe *EnginePlan, ws []engineWindow) *Calibration {
	m := optimize.Engine{CapacityRps: pe.CapacityRPS, TTFT: optimize.TTFT{BaseMs: pe.TTFTBaseMs, QueueMs: pe.TTFTQueueMs},
		TBOT: optimize.TBOT{BaseMs: pe.TBOTBaseMs, SlopeMs: pe.TBOTSlopeMs}}
	cal := &Calibration{Profile: pe.Profile, CapacityRPS: round4(pe.CapacityRPS), PlannedLoadRPS: round4(pe.LoadRPS),
		PlannedTTFTMs: round4(pe.PredictedTTFTMs), PlannedTBOTMs: round4(pe.PredictedTBOTMs), Windows: len(ws)}
	if len(ws) == 0 {
		return cal
	}
	var load, ttft, tbot float64
	for _, w := range ws {
		load += w.load
		cal.Requests += w.requests
		ttft += float64(w.requests) * w.ttft
		tbot += float64(w.requests) * w.tbot
	}
	cal.ObservedLoadRPS = round4(load / float64(len(ws)))
	if cal.Requests > 0 {
		cal.ObservedTTFTMs = round4(ttft / float64(cal.Requests))
		cal.ObservedTBOTMs = round4(tbot / float64(cal.Requests))
	}
	pt, pb := m.Predict(cal.ObservedLoadRPS)
	cal.PredictedTTFTMs, cal.PredictedTBOTMs = round4(pt), round4(pb)
	cal.LoadError = relError(cal.PlannedLoadRPS, cal.ObservedLoadRPS)
	cal.TTFTError = relError(cal.PredictedTTFTMs, cal.ObservedTTFTMs)
	cal.TBOTError = relError(cal.PredictedTBOTMs, cal.ObservedTBOTMs)
	for _, q := range []struct {
		name string
		err  *float64
	}{{"load", cal.LoadError}, {"ttft", cal.TTFTError}, {"tbot", cal.TBOTError}} {
		if q.err != nil && (*q.err > CalibrationTolerance || *q.err < -CalibrationTolerance) {
			cal.Off = append(cal.Off, q.name)
		}
	}
	return cal
}

// relError is pred/obs − 1, nil when nothing was observed.
func relError(pred, obs float64) *float64 {
	if !(obs > 0) {
		return nil
	}
	e := round4(pred/obs - 1)
	return &e
}
