package routing

import (
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// The test fleet is schemas.ExampleFleet: clusters fe-east (0.45 of the
// demand), fe-west (0.30) and fe-eu (0.25, residency eu: only the eu
// engines); engines east-h100-0, east-h100-1, east-a100-0, west-a100-0,
// eu-h100-0, eu-a100-0, in that order.

const windowNs = int64(10 * time.Second)

// span is window k: 10 s windows hopping by 5 s, ending at (k+2)·5 s.
func span(k int) (start, end int64) {
	end = int64(k+2) * windowNs / 2
	return end - windowNs, end
}

// statusRow is engine e's row of window k with inflight requests.
func statusRow(k int, engine string, inflight float64) schemas.Feature {
	s, e := span(k)
	return schemas.Feature{WindowStartUnixNano: s, WindowEndUnixNano: e, Engine: engine,
		InFlight: inflight, ReadyReplicas: 1, Healthy: true, StatusEvents: 10}
}

// pair is the (cluster, engine) row of window k with rps completions per
// second.
func pair(k int, cluster, engine string, rps float64) schemas.Feature {
	s, e := span(k)
	return schemas.Feature{WindowStartUnixNano: s, WindowEndUnixNano: e, Engine: engine, Cluster: cluster,
		Requests: uint64(rps * 10), ArrivalRPS: rps}
}

func end(k int) int64 { _, e := span(k); return e }
