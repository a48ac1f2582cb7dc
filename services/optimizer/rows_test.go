package optimizer

import (
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// window is the event time of test window k: [k·10 s, (k+1)·10 s) after
// 2026-11-29T22:00:00Z.
func window(k int) (start, end int64) {
	base := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC).UnixNano()
	return base + int64(k)*10e9, base + int64(k+1)*10e9
}

// engineRow is a healthy engine-level feature row of window k.
func engineRow(k int, engine string, rps float64) schemas.Feature {
	s, e := window(k)
	return schemas.Feature{WindowStartUnixNano: s, WindowEndUnixNano: e, Engine: engine,
		Requests: uint64(rps * 10), ArrivalRPS: rps, ReadyReplicas: 1, Healthy: true, StatusEvents: 10}
}

// pairRow is a (cluster, engine) feature row of window k.
func pairRow(k int, cluster, engine string, rps float64) schemas.Feature {
	s, e := window(k)
	return schemas.Feature{WindowStartUnixNano: s, WindowEndUnixNano: e, Engine: engine, Cluster: cluster,
		Requests: uint64(rps * 10), ArrivalRPS: rps}
}

// trafficRows is window k as an aggregator would emit it when cluster c
// sends demand[c] rps split by weights[c] (what the data planes do with
// a snapshot) and shed[c] of it is refused: served traffic only, every
// engine healthy unless listed in down.
func trafficRows(f *schemas.Fleet, k int, demand map[string]float64, weights map[string]map[string]float64, down ...string) []schemas.Feature {
	load := map[string]float64{}
	var rows []schemas.Feature
	for _, c := range f.Clusters {
		for _, e := range f.Engines {
			if w := weights[c.Name][e.Name]; w > 0 {
				rps := demand[c.Name] * w
				rows = append(rows, pairRow(k, c.Name, e.Name, rps))
				load[e.Name] += rps
			}
		}
	}
	for _, e := range f.Engines {
		r := engineRow(k, e.Name, load[e.Name])
		for _, d := range down {
			if d == e.Name {
				r.Healthy = false
			}
		}
		rows = append(rows, r)
	}
	return rows
}
