package aggregator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// FeaturesView is the body of GET /v1/features: the rows of the latest
// window emitted (from every partition this instance owns).
type FeaturesView struct {
	endNs       int64
	WindowStart time.Time     `json:"window_start"`
	WindowEnd   time.Time     `json:"window_end"`
	Rows        []FeatureJSON `json:"rows"`
}

// FeatureJSON is a feature row with the Arrow column names.
type FeatureJSON struct {
	Engine        string  `json:"engine"`
	Cluster       string  `json:"cluster,omitempty"`
	Requests      uint64  `json:"requests"`
	Errors        uint64  `json:"errors"`
	ArrivalRPS    float64 `json:"arrival_rps"`
	InFlight      float64 `json:"in_flight"`
	TTFTP50Ms     float64 `json:"ttft_p50_ms"`
	TTFTP90Ms     float64 `json:"ttft_p90_ms"`
	TTFTP99Ms     float64 `json:"ttft_p99_ms"`
	TBOTP50Ms     float64 `json:"tbot_p50_ms"`
	TBOTP90Ms     float64 `json:"tbot_p90_ms"`
	TBOTP99Ms     float64 `json:"tbot_p99_ms"`
	ErrorRate     float64 `json:"error_rate"`
	CacheHitRatio float64 `json:"cache_hit_ratio"`
	Utilization   float64 `json:"utilization"`
	KVCacheUtil   float64 `json:"kv_cache_util"`
	ReadyReplicas uint32  `json:"ready_replicas"`
	Healthy       bool    `json:"healthy"`
	StatusEvents  uint64  `json:"status_events"`
	LateEvents    uint64  `json:"late_events"`
	// The window's request shape (features/v1's appended columns).
	PromptTokensMean float64 `json:"prompt_tokens_mean"`
	OutputTokensMean float64 `json:"output_tokens_mean"`
	UncachedSqMean   float64 `json:"uncached_sq_mean"`
}

func featureJSON(r *schemas.Feature) FeatureJSON {
	return FeatureJSON{
		Engine: r.Engine, Cluster: r.Cluster, Requests: r.Requests, Errors: r.Errors,
		ArrivalRPS: r.ArrivalRPS, InFlight: r.InFlight,
		TTFTP50Ms: r.TTFTP50Ms, TTFTP90Ms: r.TTFTP90Ms, TTFTP99Ms: r.TTFTP99Ms,
		TBOTP50Ms: r.TBOTP50Ms, TBOTP90Ms: r.TBOTP90Ms, TBOTP99Ms: r.TBOTP99Ms,
		ErrorRate: r.ErrorRate, CacheHitRatio: r.CacheHitRatio, Utilization: r.Utilization,
		KVCacheUtil: r.KVCacheUtil, ReadyReplicas: r.ReadyReplicas, Healthy: r.Healthy,
		StatusEvents: r.StatusEvents, LateEvents: r.LateEvents,
		PromptTokensMean: r.PromptTokensMean, OutputTokensMean: r.OutputTokensMean, UncachedSqMean: r.UncachedSqMean,
	}
}

// ProfilesView is the body of GET /v1/profiles: the profiles in force
// (the last accepted fit of each engine and SKU) and the latest attempt
// for each, with the refusal reason when it was refused.
type ProfilesView struct {
	Profiles []ProfileJSON `json:"profiles"`
	Fits     []FitResult   `json:"fits"`
}

// ProfileJSON is a profile with the Arrow column names, plus the SLO
// capacity the fit found (solver/regress).
type ProfileJSON struct {
	Engine         string    `json:"engine,omitempty"`
	SKU            string    `json:"sku,omitempty"`
	FittedAt       time.Time `json:"fitted_at"`
	CapacityRPS    float64   `json:"capacity_rps"`
	SLOCapacityRPS float64   `json:"slo_capacity_rps"`
	TTFTBaseMs     float64   `json:"ttft_base_ms"`
	TTFTQueueMs    float64   `json:"ttft_queue_ms"`
	TBOTBaseMs     float64   `json:"tbot_base_ms"`
	TBOTSlopeMs    float64   `json:"tbot_slope_ms"`
	TTFTR2         float64   `json:"ttft_r2"`
	TBOTR2         float64   `json:"tbot_r2"`
	Samples        uint64    `json:"samples"`
	LoadMinRPS     float64   `json:"load_min_rps"`
	LoadMaxRPS     float64   `json:"load_max_rps"`
}

// Features returns the latest emitted window (GET /v1/features).
func (a *Aggregator) Features() *FeaturesView { return a.latest.Load() }

// Profiles returns the current profiles and fit attempts (GET /v1/profiles).
func (a *Aggregator) Profiles() *ProfilesView { return a.profiles.Load() }

func (a *Aggregator) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", a.health)
	if a.deps.Metrics != nil {
		mux.Handle("GET /metrics", a.deps.Metrics)
	}
	mux.HandleFunc("GET /v1/features", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Features()) })
	mux.HandleFunc("GET /v1/profiles", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Profiles()) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "{\"error\":%q}\n", "no such endpoint "+r.Method+" "+r.URL.Path+"; see /v1/features, /v1/profiles, /healthz, /metrics")
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
