package routing_test

import (
	"fmt"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
)

// A cold fleet: the first window primes each engine's in-flight reading;
// in the next, fe-east's requests queue on east-h100-0 before any has
// completed, and that growth is fe-east's demand.
func ExampleDemand() {
	f := schemas.ExampleFleetOneModel()
	d, _ := routing.NewDemand(f, routing.DemandConfig{Alpha: 0.05, MaxShedCorrection: 0.9})
	row := func(endS int64, inflight float64) []schemas.Feature {
		return []schemas.Feature{{Engine: "east-h100-0", WindowStartUnixNano: (endS - 10) * 1e9, WindowEndUnixNano: endS * 1e9,
			InFlight: inflight, StatusEvents: 10, Healthy: true, ReadyReplicas: 1}}
	}
	fmt.Println(d.Observe(10e9, row(10, 4), nil), d.Known())
	fmt.Println(d.Observe(15e9, row(15, 9), nil), d.Known())
	fmt.Printf("fe-east %.2f rps, fe-west %.2f rps\n", d.RPS(0), d.RPS(1))
	// Output:
	// false false
	// true true
	// fe-east 0.60 rps, fe-west 0.40 rps
}
