package console

import (
	"math"
	"time"
)

// State is the body of GET /api/state: everything the page draws.
type State struct {
	Title         string            `json:"title"`
	Now           time.Time         `json:"now"`
	UptimeSeconds float64           `json:"uptime_seconds"`
	SampleSeconds float64           `json:"sample_seconds"`
	Samples       int64             `json:"samples"`
	Links         []Link            `json:"links"`
	Engines       []EngineView      `json:"engines"`  // fleet order
	Clusters      []ClusterView     `json:"clusters"` // fleet order
	Optimizer     *PlanView         `json:"optimizer,omitempty"`
	Traffic       *TrafficView      `json:"traffic,omitempty"`
	History       History           `json:"history"`
	Errors        map[string]string `json:"errors,omitempty"` // source -> its last error
}

// EngineView is one engine: identity, colour, latest features and the
// data planes' view of it.
type EngineView struct {
	Name      string       `json:"name"`
	Region    string       `json:"region"`
	SKU       string       `json:"sku"`
	Color     string       `json:"color"`
	Stats     *EngineStats `json:"stats,omitempty"`
	Available bool         `json:"available"` // no data plane excludes it
	Reason    string       `json:"reason,omitempty"`
	InFlight  int64        `json:"in_flight"` // requests the data planes have open to it
	PickRPS   float64      `json:"pick_rps"`  // data planes' picks per second
}

// ClusterView is one front-end cluster.
type ClusterView struct {
	Name    string          `json:"name"`
	Region  string          `json:"region"`
	Routing *Routing        `json:"routing,omitempty"`
	Plan    *ClusterPlan    `json:"plan,omitempty"`
	Traffic *TrafficCluster `json:"traffic,omitempty"`
	// Rates over the last sample interval, from the traffic counters.
	SentRPS  float64 `json:"sent_rps"`
	OKRPS    float64 `json:"ok_rps"`
	ShedRPS  float64 `json:"shed_rps"`
	ErrorRPS float64 `json:"error_rps"`
	// CacheHitRatio is cached over prompt tokens the traffic saw;
	// SameEngineRatio the share of follow-up turns served by the previous
	// turn's engine. Both since the start.
	CacheHitRatio   float64 `json:"cache_hit_ratio"`
	SameEngineRatio float64 `json:"same_engine_ratio"`
}

// PlanView is the optimizer's state without the per-cluster part (which
// is in ClusterView.Plan).
type PlanView struct {
	Version     uint64    `json:"version"`
	SolvedAt    time.Time `json:"solved_at"`
	AgeSeconds  float64   `json:"age_seconds"` // since SolvedAt; 0 before the first solve
	Solves      int64     `json:"solves"`
	ObjectiveMs float64   `json:"objective_ms"`
	Status      string    `json:"status,omitempty"`
}

// TrafficView sums the traffic over clusters.
type TrafficView struct {
	DemandRPS float64 `json:"demand_rps"`
	SentRPS   float64 `json:"sent_rps"`
	OKRPS     float64 `json:"ok_rps"`
	ShedRPS   float64 `json:"shed_rps"`
	ErrorRPS  float64 `json:"error_rps"`
	Sent      int64   `json:"sent"`
	OK        int64   `json:"ok"`
	Shed      int64   `json:"shed"`
	Errors    int64   `json:"errors"`
	Dropped   int64   `json:"dropped"`
	InFlight  int64   `json:"in_flight"`
}

// History is the charts' data, columnar: T[i] is sample i's time (Unix
// milliseconds), oldest first, and every series has one value per sample.
type History struct {
	T             []int64          `json:"t"`
	Clusters      []ClusterHistory `json:"clusters"`        // fleet order
	EngineLoadRPS [][]float64      `json:"engine_load_rps"` // [engine][sample], State.Engines order
}

// ClusterHistory is one cluster's series.
type ClusterHistory struct {
	Cluster string `json:"cluster"`
	// Weights[e][i] is engine e's weight (State.Engines order) at sample
	// i: what the data plane served, else what the optimizer planned.
	Weights    [][]float64 `json:"weights"`
	Shed       []float64   `json:"shed_fraction"`
	DemandRPS  []float64   `json:"demand_rps"`
	SentRPS    []float64   `json:"sent_rps"`
	ShedRPS    []float64   `json:"shed_rps"`
	Multiplier []float64   `json:"multiplier"`
	Version    []uint64    `json:"version"`
}

// finite returns x, or 0 when x is NaN or infinite: JSON has no NaN, and
// one bad input must not blank the page.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// round4 keeps four decimals: the page shows no more, and the history is
// sent every second.
func round4(x float64) float64 { return math.Round(finite(x)*1e4) / 1e4 }

func ratio(num, den int64) float64 {
	if den <= 0 {
		return 0
	}
	return float64(num) / float64(den)
}

func cleanWeights(w map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(w))
	for k, v := range w {
		out[k] = round4(v)
	}
	return out
}

func (p *Plan) clean() {
	p.ObjectiveMs = finite(p.ObjectiveMs)
	for i := range p.Clusters {
		c := &p.Clusters[i]
		c.DemandRPS, c.ShedFraction = finite(c.DemandRPS), finite(c.ShedFraction)
		c.Weights = cleanWeights(c.Weights)
	}
}

func (r *Routing) clean() {
	r.AgeSeconds, r.ShedFraction = finite(r.AgeSeconds), finite(r.ShedFraction)
	r.Weights = cleanWeights(r.Weights)
}

func (e *EngineStats) clean() {
	for _, x := range []*float64{&e.LoadRPS, &e.InFlight, &e.TTFTP50Ms, &e.TTFTP99Ms, &e.CacheHitRatio, &e.Utilization} {
		*x = finite(*x)
	}
}

func (t *TrafficCluster) clean() {
	for _, x := range []*float64{&t.DemandRPS, &t.Multiplier, &t.LatencyP50Ms, &t.LatencyP99Ms, &t.TTFTP50Ms, &t.TTFTP99Ms} {
		*x = finite(*x)
	}
}
