package optimizer

import (
	"github.com/ilb-router/ilb/schemas"
)

// demand estimates each cluster's demand (requests per second it would
// send if nothing were shed) from the traffic the engines served:
//
//	observed_c = Σ_e arrival_rps of the (c, e) rows of the latest window
//	raw_c      = observed_c / (1 − min(shed_c, MaxShedCorrection))
//	demand_c   ← Alpha·raw_c + (1 − Alpha)·demand_c     (EWMA, once per window)
//
// shed_c is the shed fraction of the snapshot that was serving c, because
// shed requests never reach an engine: served traffic alone under-counts
// demand exactly when it matters. The first observation initialises the
// average. With Alpha = 0.5 and 10 s windows a step in demand is 75% in
// after two windows and 94% after four. Before any window has been seen
// the demand is the prior: the fleet's total_demand_rps, or PriorLoad of
// its capped capacity, split by demand_share. Owned by the solve loop.
type demand struct {
	cfg      DemandConfig
	ewma     map[string]float64
	observed map[string]float64 // latest raw observation, for State
	lastEnd  int64              // window end of the last observation folded in
}

func newDemand(cfg DemandConfig) *demand {
	return &demand{cfg: cfg, ewma: map[string]float64{}, observed: map[string]float64{}}
}

// update folds the latest window into the averages if it is new. shed is
// each cluster's shed fraction in force during that window.
func (d *demand) update(in *inputs, shed map[string]float64) {
	if in.newestEnd == 0 || in.newestEnd <= d.lastEnd {
		return
	}
	first := d.lastEnd == 0
	d.lastEnd = in.newestEnd
	obs := observed(in)
	for _, c := range in.fleet.Clusters {
		raw := obs[c.Name] / (1 - min(shed[c.Name], d.cfg.MaxShedCorrection))
		d.observed[c.Name] = raw
		if first {
			d.ewma[c.Name] = raw
		} else {
			d.ewma[c.Name] = d.cfg.Alpha*raw + (1-d.cfg.Alpha)*d.ewma[c.Name]
		}
	}
}

// observed sums each cluster's served rate over its current pair rows, in
// fleet engine order so the sum does not depend on map order.
func observed(in *inputs) map[string]float64 {
	out := make(map[string]float64, len(in.fleet.Clusters))
	for _, c := range in.fleet.Clusters {
		for _, e := range in.fleet.Engines {
			if r, ok := in.pairs[pairKey{c.Name, e.Name}]; ok && in.current(r) {
				out[c.Name] += r.ArrivalRPS
			}
		}
	}
	return out
}

// rps returns cluster's demand estimate; prior gives the cold-start value.
func (d *demand) rps(cluster string, prior float64) float64 {
	if d.lastEnd == 0 {
		return prior
	}
	return d.ewma[cluster]
}

// priorDemand is the cold-start demand of every cluster: total_demand_rps
// of the fleet file, or PriorLoad × Σ capacity × max_utilization, split by
// demand_share.
func priorDemand(f *schemas.Fleet, caps []engineCap, priorLoad float64) map[string]float64 {
	total := f.TotalDemandRPS
	if total <= 0 {
		for _, c := range caps {
			total += c.capacity() * f.MaxUtilization
		}
		total *= priorLoad
	}
	out := make(map[string]float64, len(f.Clusters))
	for _, c := range f.Clusters {
		out[c.Name] = total * f.DemandFraction(c.Name)
	}
	return out
}
