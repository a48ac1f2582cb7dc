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
	MembersURL    string            `json:"members_url,omitempty"` // Config.MembersURL
	Engines       []EngineView      `json:"engines"`               // fleet order
	Clusters      []ClusterView     `json:"clusters"`              // fleet order
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
	// Plan is the optimizer's model of the engine and its predictions;
	// Calibration compares them with what the engine did.
	Plan        *EnginePlan  `json:"plan,omitempty"`
	Calibration *Calibration `json:"calibration,omitempty"`
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
	GoodRPS  float64 `json:"good_rps"` // answered within the SLO: goodput
	ShedRPS  float64 `json:"shed_rps"` // 429s the traffic got
	ErrorRPS float64 `json:"error_rps"`
	// ShedSnapshotRPS and ShedAdmissionRPS split the data plane's
	// refusals by reason: the snapshot's shed fraction and local
	// admission (from Routing's counters).
	ShedSnapshotRPS  float64 `json:"shed_snapshot_rps"`
	ShedAdmissionRPS float64 `json:"shed_admission_rps"`
	// SLO is the traffic's SLO attainment and goodput, since the start
	// and over the last minute; nil before any request came back.
	SLO *SLOView `json:"slo,omitempty"`
	// CacheHitRatio is cached over prompt tokens the traffic saw;
	// SameEngineRatio the share of follow-up turns served by the previous
	// turn's engine. Both since the start.
	CacheHitRatio   float64 `json:"cache_hit_ratio"`
	SameEngineRatio float64 `json:"same_engine_ratio"`
}

// SLOView is a cluster's SLO attainment: answers within the SLO over
// every request that came back (answered, shed or failed: refusals count
// as misses), and goodput, the answers within the SLO per second.
type SLOView struct {
	Attainment    float64 `json:"attainment"` // since the start
	Attainment1m  float64 `json:"attainment_1m"`
	GoodputRPS1m  float64 `json:"goodput_rps_1m"`
	Good          int64   `json:"good"`
	Outcomes      int64   `json:"outcomes"` // answered + shed + failed, since the start
	Outcomes1m    int64   `json:"outcomes_1m"`
	WindowSeconds float64 `json:"window_seconds"` // what "1m" spanned (less early on)
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
	GoodRPS   float64 `json:"good_rps"`
	ShedRPS   float64 `json:"shed_rps"`
	ErrorRPS  float64 `json:"error_rps"`
	Sent      int64   `json:"sent"`
	OK        int64   `json:"ok"`
	Good      int64   `json:"good"`
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
	// GoodRPS is goodput; ShedSnapshotRPS and ShedAdmissionRPS the data
	// plane's refusals by reason; Attainment1m the SLO attainment over
	// the minute before each sample (−1: nothing came back in it).
	GoodRPS          []float64 `json:"good_rps"`
	ShedSnapshotRPS  []float64 `json:"shed_snapshot_rps"`
	ShedAdmissionRPS []float64 `json:"shed_admission_rps"`
	Attainment1m     []float64 `json:"attainment_1m"`
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
	for i := range p.Engines {
		e := &p.Engines[i]
		for _, x := range []*float64{&e.CapacityRPS, &e.LoadRPS, &e.PredictedTTFTMs, &e.PredictedTBOTMs,
			&e.TTFTBaseMs, &e.TTFTQueueMs, &e.TBOTBaseMs, &e.TBOTSlopeMs} {
			*x = finite(*x)
		}
	}
	for i := range p.Clusters {
		c := &p.Clusters[i]
		c.DemandRPS, c.ShedFraction = finite(c.DemandRPS), finite(c.ShedFraction)
		c.Weights = cleanWeights(c.Weights)
	}
}

func (r *Routing) clean() {
	r.AgeSeconds, r.ShedFraction = finite(r.AgeSeconds), finite(r.ShedFraction)
	r.Weights = cleanWeights(r.Weights)
	for i := range r.Classes {
		k := &r.Classes[i]
		k.Weights, k.ShedFraction = cleanWeights(k.Weights), finite(k.ShedFraction)
	}
}

func (e *EngineStats) clean() {
	for _, x := range []*float64{&e.LoadRPS, &e.InFlight, &e.TTFTP50Ms, &e.TTFTP99Ms, &e.TBOTP50Ms, &e.TBOTP99Ms,
		&e.CacheHitRatio, &e.Utilization} {
		*x = finite(*x)
	}
}

func (t *TrafficCluster) clean() {
	for _, x := range []*float64{&t.DemandRPS, &t.Multiplier, &t.LatencyP50Ms, &t.LatencyP99Ms, &t.TTFTP50Ms, &t.TTFTP99Ms,
		&t.TBOTP50Ms, &t.TBOTP99Ms} {
		*x = finite(*x)
	}
}
