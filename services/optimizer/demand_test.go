package optimizer

import (
	"math"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
)

// The service's demand runs routing.Demand on its latest rows: the first
// window with engine status only primes the in-flight readings (the prior
// holds), and from the next one the requests queueing on an engine count
// as demand of the clusters that completed there.
func TestDemandCountsQueueGrowth(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	in := newInputs(f)
	d := newDemand(DefaultConfig(f).Demand)
	status := func(k int, inflight float64) schemas.Feature {
		r := engineRow(k, "east-h100-0", 1)
		r.InFlight = inflight
		return r
	}
	in.addFeatures([]schemas.Feature{status(1, 0), pairRow(1, "fe-east", "east-h100-0", 1)})
	d.update(in, routing.NewRows(in.fleet), nil)
	if got := d.rps("fe-east", 7); got != 7 {
		t.Fatalf("priming window: %v rps, want the prior 7", got)
	}
	// Window 2 (tumbling 10 s windows here): 1 rps completed while 20 more
	// requests queued, 2 rps more.
	in.addFeatures([]schemas.Feature{status(2, 20), pairRow(2, "fe-east", "east-h100-0", 1)})
	d.update(in, routing.NewRows(in.fleet), nil)
	want := 1 + 20/10.0
	if got := d.rps("fe-east", 7); math.Abs(got-want) > 1e-9 || math.Abs(d.observed["fe-east"]-want) > 1e-9 {
		t.Fatalf("second window: %v rps (observed %v), want %v", got, d.observed["fe-east"], want)
	}
	if got := d.rps("fe-west", 7); got != 0 {
		t.Fatalf("fe-west completed nothing: %v rps", got)
	}
	if got := d.rps("no-such-cluster", 7); got != 0 {
		t.Fatalf("unknown cluster: %v", got)
	}
}
