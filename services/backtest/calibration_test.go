package backtest

import (
	"math"
	"testing"
	"time"

	"github.com/ilb-router/ilb/solver/engine"
)

// TestMeasureCapacity: saturated with identical requests, the engine
// serves a batch of B every prefill of B prompts plus out−1 decode steps,
// 1/(prompt/rate + (out−1)·step(B)/B) requests per second.
func TestMeasureCapacity(t *testing.T) {
	p := engine.Params{PrefillTokensPerS: 10000, DecodeBaseMs: 20, DecodePerSeqMs: 0.5, MaxBatch: 16,
		KVCacheTokens: 1 << 20, BlockTokens: 512, Replicas: 1}
	w := &workload{}
	for i := range 2000 {
		w.arrival = append(w.arrival, int64(i))
		w.prompt = append(w.prompt, 2000)
		w.output = append(w.output, 101)
		w.blockOff = append(w.blockOff, 0)
	}
	w.blockOff = append(w.blockOff, 0)
	got := measureCapacity(p, w)
	want := 1 / (2000.0/10000 + 100*(20+0.5*16)/1000/16)
	if math.Abs(got/want-1) > 0.1 {
		t.Errorf("measured %.4f rps, want %.4f within 10%%", got, want)
	}
}

// TestCalibrationReported: the optimizer's run reports, per engine, its
// model against the engines, with predictions and observations of the
// requests it served.
func TestCalibrationReported(t *testing.T) {
	f := oneEngineFleet(t)
	tr := synthetic(200, 3, 2*time.Second, 50)
	for i := range tr.Requests {
		tr.Requests[i].Cluster = "fe-a"
	}
	res := run(t, f, tr, func(c *Config) { c.Policies = []string{PolicyOptimizer, PolicyHash} })
	opt, hash := res.Policies[0], res.Policies[1]
	if len(hash.Calibration) != 0 {
		t.Error("a policy without a model reports calibration")
	}
	if len(opt.Calibration) != 1 {
		t.Fatalf("calibration %+v", opt.Calibration)
	}
	c := opt.Calibration[0]
	if c.Requests != opt.Served || !(c.PredictedTTFTMs > 0 && c.ObservedTTFTMs > 0 && c.PredictedTBOTMs > 0 &&
		c.ObservedTBOTMs > 0 && c.ModelCapacityRPS > 0 && c.MeasuredCapacityRPS > 0 && c.MeanLoadRPS > 0) {
		t.Errorf("calibration %+v of %d served", c, opt.Served)
	}
	if want := c.PredictedTTFTMs/c.ObservedTTFTMs - 1; math.Abs(c.TTFTErrorRatio-want) > 1e-12 {
		t.Errorf("ttft error %v, want %v", c.TTFTErrorRatio, want)
	}
}
