package backtest

import (
	"context"
	"reflect"
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
		if !reflect.DeepEqual(fresh, pooled) {
			t.Errorf("run %d (%s): pooled engines give %+v, new ones %+v", i, name, pooled, fresh)
		}
	}
	if n := len(shared.fi.pool.free); n == 0 {
		t.Error("no engine was returned to the pool")
	}
}
