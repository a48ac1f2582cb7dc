package backtest

import (
	"math"
	"slices"
)

// Result is what a backtest reports: the JSON of `ilb backtest --json`.
type Result struct {
	Trace    TraceSummary   `json:"trace"`
	Seed     uint64         `json:"seed"`
	Speed    float64        `json:"speed"`
	Policies []PolicyResult `json:"policies"`
}

// TraceSummary describes the shaped workload.
type TraceSummary struct {
	Format        string  `json:"format"`
	Requests      int     `json:"requests"`
	Conversations int     `json:"conversations"`
	DurationS     float64 `json:"duration_s"` // from the first to the last arrival
	SwingCopies   int     `json:"swing_copies"`
	SwingDropped  int     `json:"swing_dropped"`
	// Spread is whether requests sharing a timestamp were spread out
	// (Config.Spread).
	Spread bool `json:"spread"`
	// JitterMs is Config.Jitter: each arrival moved later by up to this
	// much, drawn from the seed (0: the trace's timestamps).
	JitterMs float64 `json:"jitter_ms,omitempty"`
}

// PolicyResult is one policy's outcome. Latencies are of served requests
// and include the network time between the request's cluster and the
// engine's region.
type PolicyResult struct {
	Policy string `json:"policy"`
	// SLOAttainment is the share of ALL requests of the trace served with
	// TTFT <= SLO.TTFTMs and mean TBOT <= SLO.TBOTMs; shed and failed
	// requests count as misses, so refusing work cannot raise it.
	SLO           SLO     `json:"slo"`
	SLOAttainment float64 `json:"slo_attainment"`
	// GoodputRPS is the requests served within the SLO per second of the
	// trace (from its first arrival to its last).
	GoodputRPS     float64 `json:"goodput_rps"`
	ServedFraction float64 `json:"served_fraction"`
	ShedFraction   float64 `json:"shed_fraction"`
	FailedFraction float64 `json:"failed_fraction"`
	Requests       int     `json:"requests"`
	Served         int     `json:"served"`
	Good           int     `json:"good"` // served within the SLO
	Shed           int     `json:"shed"` // refused by the policy (a shed fraction, admission control)
	// ShedAdmission is the part of Shed refused by the data plane's local
	// admission (the optimizer policy); the rest is its shed fraction.
	ShedAdmission int   `json:"shed_admission"`
	Failed        int   `json:"failed"` // rejected, lost to a failure, or no engine available
	TTFTMs        Stats `json:"ttft_ms"`
	E2EMs         Stats `json:"e2e_ms"`
	// TBOTMs is the distribution of the requests' mean time between
	// output tokens (0 for a one-token answer).
	TBOTMs Stats `json:"tbot_ms"`
	// CacheHitRatio is prompt tokens served from an engine's KV cache over
	// all prompt tokens of served requests.
	CacheHitRatio float64 `json:"cache_hit_ratio"`
	// MaxUtilization is the largest engine utilisation (EngineResult).
	MaxUtilization float64 `json:"max_utilization"`
	// WeightChurn is the mean, over weight updates and clusters, of the
	// total variation distance ½·Σ|Δw| between consecutive weight vectors
	// (0 for policies that never change weights).
	WeightChurn   float64 `json:"weight_churn"`
	WeightUpdates int     `json:"weight_updates"`
	// WeightMovedPerMinute is the total variation the weights moved while
	// requests arrived (the sum over the updates up to the last arrival
	// of what WeightChurn averages), per cluster and minute of the
	// trace's span (as for GoodputRPS, the same for every policy): how
	// much traffic was re-pointed per unit of time, which, unlike the
	// mean per update, does not favour a policy that updates often in
	// small steps.
	WeightMovedPerMinute float64 `json:"weight_moved_per_minute"`
	// FollowupMovedRatio is the share of follow-up turns (requests of a
	// conversation seen before) routed to another engine than the
	// conversation's previous turn.
	FollowupMovedRatio float64         `json:"followup_moved_ratio"`
	Followups          int             `json:"followups"`
	SimulatedS         float64         `json:"simulated_s"`
	Clusters           []ClusterResult `json:"clusters"`
	Engines            []EngineResult  `json:"engines"`
	// Calibration compares the optimizer's model with the engines
	// (optimizer policy only).
	Calibration []EngineCalibration `json:"calibration,omitempty"`

	// For the report and the terminal; not in the JSON (wall time would
	// make equal runs differ).
	Series  *Series   `json:"-"`
	TTFTCDF []float64 `json:"-"` // at CDFQuantiles
	E2ECDF  []float64 `json:"-"`
	WallS   float64   `json:"-"`
	// outcomes are the per-request results, for WriteRequests.
	outcomes *outcomes
}

// Stats summarises a latency distribution, in ms.
type Stats struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// ClusterResult is one front-end cluster's share of a policy's outcome.
type ClusterResult struct {
	Name          string  `json:"name"`
	Requests      int     `json:"requests"`
	Served        int     `json:"served"`
	Good          int     `json:"good"`
	Shed          int     `json:"shed"`
	SLOAttainment float64 `json:"slo_attainment"`
	TTFTMs        Stats   `json:"ttft_ms"`
	// RemoteRatio is the share of its routed requests that went to an
	// engine in another region.
	RemoteRatio float64 `json:"remote_ratio"`
}

// EngineResult is one engine's share of a policy's outcome.
type EngineResult struct {
	Name     string `json:"name"`
	Requests int    `json:"requests"` // routed to it
	TTFTMs   Stats  `json:"ttft_ms"`  // of the requests it served
	// Utilization is the mean, over status ticks, of running requests
	// over max_batch × ready replicas: the aggregator's utilisation.
	Utilization float64 `json:"utilization"`
	// BusyRatio is the share of the simulated time the engine computed
	// (prefill or decode); decoding even one request keeps it busy.
	BusyRatio     float64 `json:"busy_ratio"`
	CacheHitRatio float64 `json:"cache_hit_ratio"`
}

// CDFQuantiles are the quantiles at which PolicyResult keeps its latency
// CDFs for the report.
var CDFQuantiles = cdfQuantiles()

func cdfQuantiles() []float64 {
	var q []float64
	for i := 0; i <= 100; i++ {
		q = append(q, float64(i)/100)
	}
	return slices.Concat(q[:100], []float64{0.995, 0.999, 1})
}

// summarise sorts xs and returns its statistics (nearest-rank quantiles).
func summarise(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	sortFloats(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return Stats{Mean: sum / float64(len(xs)), P50: quantile(xs, 0.5), P90: quantile(xs, 0.9), P99: quantile(xs, 0.99)}
}

// quantile is the nearest-rank q-quantile of sorted xs.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func cdf(sorted []float64) []float64 {
	out := make([]float64, len(CDFQuantiles))
	for i, q := range CDFQuantiles {
		out[i] = quantile(sorted, q)
	}
	return out
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
