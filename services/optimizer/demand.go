package optimizer

import (
	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
)

// demand estimates each cluster's demand (requests per second it would
// send if nothing were shed) with routing.Demand, the estimator the
// backtester runs too (README.md, Demand): per new window, the served
// rate of the current (cluster, engine) rows plus the growth of each
// engine's in-flight requests, corrected for the shed fraction in force,
// smoothed with weight Alpha (the first observations averaged plainly).
// Before any window has been folded in, the demand is the prior: the
// fleet's total_demand_rps, or PriorLoad of its capped capacity, split by
// demand_share. Owned by the solve loop.
type demand struct {
	cfg      DemandConfig
	est      *routing.Demand // built at the first update, for its fleet
	observed map[string]float64
}

func newDemand(cfg DemandConfig) *demand {
	return &demand{cfg: cfg, observed: map[string]float64{}}
}

// update folds the latest window into the estimate if it is new. shed is
// each cluster's shed fraction in force during that window.
func (d *demand) update(in *inputs, shed map[string]float64) {
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
	sheds := make([]float64, len(in.fleet.Clusters))
	for c, fc := range in.fleet.Clusters {
		sheds[c] = shed[fc.Name]
	}
	if !d.est.Observe(in.newestEnd, currentRows(in), sheds) {
		return
	}
	for c, fc := range in.fleet.Clusters {
		d.observed[fc.Name] = d.est.Observed(c)
	}
}

// currentRows are the rows of the latest window: each engine's and each
// (cluster, engine) pair's latest row if it is current, in fleet order.
func currentRows(in *inputs) []schemas.Feature {
	var rows []schemas.Feature
	for _, e := range in.fleet.Engines {
		if r, ok := in.engines[e.Name]; ok && in.current(r) {
			rows = append(rows, r)
		}
	}
	for _, c := range in.fleet.Clusters {
		for _, e := range in.fleet.Engines {
			if r, ok := in.pairs[pairKey{c.Name, e.Name}]; ok && in.current(r) {
				rows = append(rows, r)
			}
		}
	}
	return rows
}

// known reports whether any demand has been observed.
func (d *demand) known() bool { return d != nil && d.est != nil && d.est.Known() }

// rps returns cluster's demand estimate; prior gives the cold-start value.
func (d *demand) rps(cluster string, prior float64) float64 {
	if d.est == nil || !d.est.Known() {
		return prior
	}
	c, ok := d.est.ClusterIndex(cluster)
	if !ok {
		return 0
	}
	return d.est.RPS(c)
}

// priorDemand is the cold-start demand of every cluster
// (routing.PriorDemand over the derated capacities).
func priorDemand(f *schemas.Fleet, caps []engineCap, priorLoad float64) map[string]float64 {
	capacity := make([]float64, len(caps))
	for i, c := range caps {
		capacity[i] = c.capacity()
	}
	prior := routing.PriorDemand(f, capacity, priorLoad)
	out := make(map[string]float64, len(f.Clusters))
	for c, fc := range f.Clusters {
		out[fc.Name] = prior[c]
	}
	return out
}
