package routing

import (
	"errors"
	"fmt"
	"math"

	"github.com/ilb-router/ilb/schemas"
)

// DemandConfig says how a cluster's demand is estimated from the traffic
// its engines served.
type DemandConfig struct {
	// Alpha is the weight of a new window's observation in the moving
	// average, in (0, 1]. The first observations are averaged plainly
	// (weight 1/n for the n-th) until 1/n falls below Alpha, so that the
	// first window does not dominate a slow average for minutes.
	Alpha float64
	// MaxShedCorrection caps the shed fraction that observed traffic is
	// scaled up by (observed / (1 − shed)), in [0, 1), so that a cluster
	// that shed everything does not get an infinite demand.
	MaxShedCorrection float64
}

// Validate reports the first problem with c.
func (c DemandConfig) Validate() error {
	switch {
	case !(c.Alpha > 0 && c.Alpha <= 1):
		return fmt.Errorf("demand alpha %v must be in (0, 1]", c.Alpha)
	case !(c.MaxShedCorrection >= 0 && c.MaxShedCorrection < 1):
		return fmt.Errorf("max shed correction %v must be in [0, 1)", c.MaxShedCorrection)
	}
	return nil
}

// Demand estimates each demand row's demand (a cluster's requests of one
// class, Rows; in a fleet of one class the rows are the clusters), the
// requests per second it would send if nothing were shed, from feature
// windows. For each window (c below is a row, its served rate that of the
// feature rows of its cluster and class):
//
//	served_ce  = arrival_rps of the (c, e) row (completions per second)
//	growth_e   = Δ in_flight of engine e since its previous status row / Δt
//	observed_c = Σ_e served_ce + growth_e · share_ce
//	raw_c      = max(observed_c, 0) / (1 − min(shed_c, MaxShedCorrection))
//	demand_c   ← a·raw_c + (1 − a)·demand_c,   a = max(Alpha, 1/n)
//
// Completions alone lag arrivals by the requests' latency and stop at the
// engines' throughput: a fleet whose queues grow would look exactly
// loaded and never shed, and a cold fleet would look idle while its first
// requests queue. The growth of the requests queued or running on an
// engine (its status) is the rest of its arrivals. It is shared among the
// clusters as their completions on that engine in this window, else as
// their latest completions on it in an earlier window, else as the
// fleet's demand shares of the clusters that may use it. shed_c is the
// shed fraction in force while the window was observed: shed requests
// never reach an engine.
//
// The first window that carries engine status only primes the in-flight
// readings: without a previous reading its growth is unknown, and at a
// cold start its completions are near zero. Before an observation has
// been folded in, Known is false and callers use their prior.
type Demand struct {
	cfg      DemandConfig
	idx      fleetIndex
	rows     *Rows
	elig     []bool    // [c*ne+e]: row c may use engine e
	share    []float64 // by row: the fleet's demand fraction (RowShares)
	est, raw []float64 // by row
	n        int       // observations folded in
	lastEnd  int64     // end of the last window observed
	inflight []float64 // by engine: in-flight of its latest status row
	atNs     []int64   // by engine: that row's window end; 0: none yet
	recent   []float64 // [c*ne+e]: latest positive completion rate

	served, growth []float64 // scratch, by pair and engine
	grown          []bool    // scratch, by engine: growth known this window
}

// NewDemand returns an estimator for the demand rows (NewRows) and
// engines of f.
func NewDemand(f *schemas.Fleet, cfg DemandConfig) (*Demand, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, errors.New("routing: demand: no fleet")
	}
	rows := NewRows(f)
	nc, ne := rows.Len(), len(f.Engines)
	d := &Demand{cfg: cfg, idx: newFleetIndex(f), rows: rows, elig: make([]bool, nc*ne), share: RowShares(f, rows),
		est: make([]float64, nc), raw: make([]float64, nc), inflight: make([]float64, ne), atNs: make([]int64, ne),
		recent: make([]float64, nc*ne), served: make([]float64, nc*ne), growth: make([]float64, ne), grown: make([]bool, ne)}
	for c, rw := range rows.Rows {
		fc := f.Clusters[rw.Cluster]
		for e, fe := range f.Engines {
			_, reach := f.NetworkMsBetween(fc.Region, fe.Region)
			d.elig[c*ne+e] = reach && f.Eligible(fc, fe) && rows.Serves(rw.Class, e)
		}
	}
	return d, nil
}

// Rows are the demand rows the estimates are indexed by.
func (d *Demand) Rows() *Rows { return d.rows }

// Known reports whether an observation has been folded in.
func (d *Demand) Known() bool { return d.n > 0 }

// RPS is row c's demand estimate (index into Rows); 0 before Known.
func (d *Demand) RPS(c int) float64 { return d.est[c] }

// RowIndex returns the index of the row with the given name (a cluster's
// name in a fleet of one class).
func (d *Demand) RowIndex(name string) (int, bool) { return d.rows.ByName(name) }

// Observed is row c's latest raw observation (shed-corrected).
func (d *Demand) Observed(c int) float64 { return d.raw[c] }

// Observe folds in the window ending at endNs, given its rows: engine rows
// (Cluster empty) and (cluster, class, engine) rows; rows of engines,
// clusters or classes not in the fleet are ignored. shed[c] is the shed
// fraction in force for demand row c (nil: none). It reports whether the window was
// folded in: not when it is no newer than the last one, nor when it only
// primes the in-flight readings.
func (d *Demand) Observe(endNs int64, rows []schemas.Feature, shed []float64) bool {
	if endNs <= d.lastEnd {
		return false
	}
	d.lastEnd = endNs
	d.collect(rows)
	if d.n == 0 && d.priming() {
		return false
	}
	d.n++
	a := max(d.cfg.Alpha, 1/float64(d.n))
	ne := len(d.growth)
	for c := range d.est {
		obs := 0.0
		for e := range ne {
			obs += d.served[c*ne+e]
			if d.grown[e] {
				obs += d.growth[e] * d.attribution(c, e)
			}
		}
		s := 0.0
		if c < len(shed) {
			s = min(max(shed[c], 0), d.cfg.MaxShedCorrection)
		}
		d.raw[c] = max(obs, 0) / (1 - s)
		if d.n == 1 {
			d.est[c] = d.raw[c]
		} else {
			d.est[c] = a*d.raw[c] + (1-a)*d.est[c]
		}
	}
	d.remember()
	return true
}

// collect reads a window's rows into served and growth, and moves each
// engine's in-flight reading on.
func (d *Demand) collect(rows []schemas.Feature) {
	ne := len(d.growth)
	clear(d.served)
	clear(d.grown)
	for i := range rows {
		r := &rows[i]
		e, ok := d.idx.engine(r.Engine)
		if !ok {
			continue
		}
		if r.Cluster != "" {
			if c, ok := d.rows.ByKey(r.Cluster, r.Class); ok && isRate(r.ArrivalRPS) {
				d.served[c*ne+e] += r.ArrivalRPS
			}
			continue
		}
		if r.StatusEvents == 0 || !isRate(r.InFlight) || r.WindowEndUnixNano <= d.atNs[e] {
			continue
		}
		if d.atNs[e] != 0 {
			d.growth[e] = (r.InFlight - d.inflight[e]) / (float64(r.WindowEndUnixNano-d.atNs[e]) / 1e9)
			d.grown[e] = true
		}
		d.inflight[e], d.atNs[e] = r.InFlight, r.WindowEndUnixNano
	}
}

// priming reports whether the window just collected gave some engine its
// first status reading and none its growth.
func (d *Demand) priming() bool {
	read := false
	for e := range d.grown {
		if d.grown[e] {
			return false
		}
		read = read || d.atNs[e] != 0
	}
	return read
}

// attribution is cluster c's share of engine e's in-flight growth.
func (d *Demand) attribution(c, e int) float64 {
	ne := len(d.growth)
	for _, m := range [][]float64{d.served, d.recent} {
		total := 0.0
		for k := range d.est {
			total += m[k*ne+e]
		}
		if total > 0 {
			return m[c*ne+e] / total
		}
	}
	total := 0.0
	for k := range d.est {
		if d.elig[k*ne+e] {
			total += d.share[k]
		}
	}
	if total > 0 && d.elig[c*ne+e] {
		return d.share[c] / total
	}
	return 0
}

// remember keeps each pair's latest positive completion rate.
func (d *Demand) remember() {
	for i, v := range d.served {
		if v > 0 {
			d.recent[i] = v
		}
	}
}

func isRate(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// PriorDemand is every demand row's demand before any window has been
// seen, by row index of rows: the fleet's total_demand_rps, or priorLoad ×
// Σ capacity × max_utilization over the engines (capacityRPS, derated),
// split by RowShares.
func PriorDemand(f *schemas.Fleet, rows *Rows, capacityRPS []float64, priorLoad float64) []float64 {
	total := f.TotalDemandRPS
	if total <= 0 {
		for _, c := range capacityRPS {
			total += c * f.MaxUtilization
		}
		total *= priorLoad
	}
	out := RowShares(f, rows)
	for r := range out {
		out[r] *= total
	}
	return out
}

// fleetIndex maps a fleet's names to their indexes.
type fleetIndex struct {
	clusters, engines map[string]int
}

func newFleetIndex(f *schemas.Fleet) fleetIndex {
	x := fleetIndex{clusters: make(map[string]int, len(f.Clusters)), engines: make(map[string]int, len(f.Engines))}
	for i, c := range f.Clusters {
		x.clusters[c.Name] = i
	}
	for i, e := range f.Engines {
		x.engines[e.Name] = i
	}
	return x
}

func (x fleetIndex) cluster(name string) (int, bool) {
	i, ok := x.clusters[name]
	return i, ok
}

func (x fleetIndex) engine(name string) (int, bool) {
	i, ok := x.engines[name]
	return i, ok
}

// PublishedShed is the shed fraction to publish for a solution's shed:
// none while demand is unknown, that is before any has been observed,
// unless the fleet file declares it (total_demand_rps). Without either,
// the cold-start demand is a guess (a share of capacity), and refusing on
// a guess would refuse work the fleet could serve; local admission still
// guards the engines.
func PublishedShed(shed float64, known bool) float64 {
	if !known {
		return 0
	}
	return shed
}

// DemandKnown reports whether a cluster's demand is known to the
// optimizer: observed, or declared by the fleet file.
func DemandKnown(f *schemas.Fleet, d *Demand) bool {
	return (d != nil && d.Known()) || f.TotalDemandRPS > 0
}
