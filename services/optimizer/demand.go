package optimizer

import (
	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
)

// demand estimates each demand row's demand (requests per second of one
// cluster and request class it would send if nothing were shed; a fleet
// of one class has one row per cluster, named like it) with
// routing.Demand, the estimator the backtester runs too (README.md,
// Demand): per new window, the served rate of the current (cluster,
// class, engine) rows plus the growth of each engine's in-flight
// requests, corrected for the shed fraction in force, smoothed with
// weight Alpha (the first observations averaged plainly). Before any
// window has been folded in, the demand is the prior: the fleet's
// total_demand_rps, or PriorLoad of its capped capacity, split by
// demand_share and model mix (routing.RowShares). Owned by the solve
// loop.
type demand struct {
	cfg      DemandConfig
	est      *routing.Demand // built at the first update, for its fleet
	observed map[string]float64
}

func newDemand(cfg DemandConfig) *demand {
	return &demand{cfg: cfg, observed: map[string]float64{}}
}

// update folds the latest window into the estimate if it is new. shed is
// each row's shed fraction in force during that window, by row name.
func (d *demand) update(in *inputs, rows *routing.Rows, shed map[string]float64) {
	if in.newestEnd == 0 {
		return
	}
	if d.est == nil {
		est, err := routing.NewDemand(in.fleet, routing.DemandConfig{Alpha: d.cfg.Alpha, MaxShedCorrection: d.cfg.MaxShedCorrection})
		if err != nil {
			return // Config.Validate and the fleet's own validation rule this out
		}
		d.est = est
	}
	sheds := make([]float64, rows.Len())
	for r, rw := range rows.Rows {
		sheds[r] = shed[rw.Name]
	}
	if !d.est.Observe(in.newestEnd, currentRows(in, rows), sheds) {
		return
	}
	for r, rw := range rows.Rows {
		d.observed[rw.Name] = d.est.Observed(r)
	}
}

// currentRows are the rows of the latest window: each engine's and each
// (cluster, class, engine) row's latest row if it is current, in fleet
// order (clusters, their classes, engines).
func currentRows(in *inputs, rows *routing.Rows) []schemas.Feature {
	var out []schemas.Feature
	for _, e := range in.fleet.Engines {
		if r, ok := in.engines[e.Name]; ok && in.current(r) {
			out = append(out, r)
		}
	}
	for _, rw := range rows.Rows {
		c, class := in.fleet.Clusters[rw.Cluster].Name, rows.ClassKey(rw.Class)
		for _, e := range in.fleet.Engines {
			if r, ok := in.pairs[pairKey{c, class, e.Name}]; ok && in.current(r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// known reports whether any demand has been observed.
func (d *demand) known() bool { return d != nil && d.est != nil && d.est.Known() }

// rps returns the named row's demand estimate; prior gives the cold-start
// value.
func (d *demand) rps(row string, prior float64) float64 {
	if d.est == nil || !d.est.Known() {
		return prior
	}
	r, ok := d.est.RowIndex(row)
	if !ok {
		return 0
	}
	return d.est.RPS(r)
}

// priorDemand is the cold-start demand of every row, by row name
// (routing.PriorDemand over the derated capacities).
func priorDemand(f *schemas.Fleet, rows *routing.Rows, caps []engineCap, priorLoad float64) map[string]float64 {
	capacity := make([]float64, len(caps))
	for i, c := range caps {
		capacity[i] = c.capacity()
	}
	prior := routing.PriorDemand(f, rows, capacity, priorLoad)
	out := make(map[string]float64, rows.Len())
	for r, rw := range rows.Rows {
		out[rw.Name] = prior[r]
	}
	return out
}
