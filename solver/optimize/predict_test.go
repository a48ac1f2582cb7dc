package optimize

import (
	"math"
	"testing"
)

func TestEnginePredict(t *testing.T) {
	e := Engine{Name: "e", CapacityRps: 10, TTFT: TTFT{BaseMs: 100, QueueMs: 40}, TBOT: TBOT{BaseMs: 20, SlopeMs: 15}}
	for _, tc := range []struct{ load, ttft, tbot float64 }{
		{0, 100, 20},
		{5, 140, 27.5},           // ρ 0.5: 100 + 40·1, 20 + 15·0.5
		{20, 100 + 40*99, 34.85}, // ρ capped at 0.99
	} {
		ttft, tbot := e.Predict(tc.load)
		if math.Abs(ttft-tc.ttft) > 1e-9 || math.Abs(tbot-tc.tbot) > 1e-9 {
			t.Errorf("load %v: Predict = %v, %v; want %v, %v", tc.load, ttft, tbot, tc.ttft, tc.tbot)
		}
	}
	if ttft, tbot := (Engine{TTFT: TTFT{BaseMs: 7}, TBOT: TBOT{BaseMs: 3}}).Predict(5); ttft != 7 || tbot != 3 {
		t.Errorf("no capacity: Predict = %v, %v; want the base latencies 7, 3", ttft, tbot)
	}
}
