package backtest

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Runs whose engines come from the pool (earlier runs' engines, of other
// policies and of the same one, with first tokens on or off, and the
// calibration's probes) give the results of runs on new engines.
func TestPooledEnginesRunAlike(t *testing.T) {
	short := func(c *Config) { c.Duration, c.Parallel = 5*time.Minute, 1 }
	policies := []string{PolicyHash, PolicyOptimizer, "llm-d", PolicyPID, PolicyOptimizer}
	shared := acceptanceBacktest(t, fleetShort, short)
	for i, name := range policies {
		fresh, err := acceptanceBacktest(t, fleetShort, short).RunPolicy(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		pooled, err := shared.RunPolicy(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		fresh.WallS, pooled.WallS = 0, 0
		// The requests' outcomes hold NaN for every request not served
		// (DeepEqual never finds NaN equal to itself): compared apart.
		if !sameOutcomes(fresh.outcomes, pooled.outcomes) {
			t.Errorf("run %d (%s): pooled engines give other outcomes than new ones", i, name)
		}
		fresh.outcomes, pooled.outcomes = nil, nil
		if !reflect.DeepEqual(fresh, pooled) {
			t.Errorf("run %d (%s): pooled engines give %+v, new ones %+v", i, name, pooled, fresh)
		}
	}
	if n := len(shared.fi.pool.free); n == 0 {
		t.Error("no engine was returned to the pool")
	}
}

// sameOutcomes reports whether a and b record the same outcomes, a NaN
// latency (a request not served) equal to a NaN.
func sameOutcomes(a, b *outcomes) bool {
	same := func(x, y []float64) bool {
		return slices.EqualFunc(x, y, func(u, v float64) bool { return u == v || math.IsNaN(u) && math.IsNaN(v) })
	}
	return slices.Equal(a.kind, b.kind) && slices.Equal(a.engine, b.engine) && slices.Equal(a.cached, b.cached) &&
		same(a.ttft, b.ttft) && same(a.e2e, b.e2e) && same(a.tbot, b.tbot)
}
