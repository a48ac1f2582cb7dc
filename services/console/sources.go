package console

import (
	"context"
	"time"
)

// Sources are the console's inputs; any may be nil (its part of the page
// stays empty). Run calls them from its one goroutine, each bounded by
// Config.SourceTimeout.
type Sources struct {
	Plan    PlanSource
	Routing RoutingSource
	Engines EngineSource
	Traffic TrafficSource
}

// PlanSource reports the optimizer's latest solution.
type PlanSource interface {
	Plan(ctx context.Context) (Plan, error)
}

// RoutingSource reports what the data planes serve, per cluster.
type RoutingSource interface {
	Routing(ctx context.Context) ([]Routing, error)
}

// EngineSource reports the latest windowed features per engine.
type EngineSource interface {
	Engines(ctx context.Context) ([]EngineStats, error)
}

// TrafficSource reports the traffic generator's counters per cluster.
type TrafficSource interface {
	Traffic(ctx context.Context) ([]TrafficCluster, error)
}

// Plan is the optimizer's latest solution.
type Plan struct {
	Version     uint64        `json:"version"`
	SolvedAt    time.Time     `json:"solved_at"` // zero: no solve yet
	Solves      int64         `json:"solves"`
	ObjectiveMs float64       `json:"objective_ms"`
	Status      string        `json:"status,omitempty"` // e.g. "waiting for profiles"
	Clusters    []ClusterPlan `json:"clusters"`
	Engines     []EnginePlan  `json:"engines,omitempty"`
}

// EnginePlan is one engine in the latest solve: the latency model in
// force and what it predicts at the planned load (without the network).
type EnginePlan struct {
	Name    string `json:"name"`
	Profile string `json:"profile,omitempty"` // fitted, sku or prior
	// CapacityRPS is the model's capacity after derating; LoadRPS the
	// load the solve planned for the engine.
	CapacityRPS     float64 `json:"capacity_rps"`
	LoadRPS         float64 `json:"load_rps"`
	PredictedTTFTMs float64 `json:"predicted_ttft_ms"`
	PredictedTBOTMs float64 `json:"predicted_tbot_ms"`
	// The model: ttft = TTFTBaseMs + TTFTQueueMs·ρ/(1−ρ), tbot =
	// TBOTBaseMs + TBOTSlopeMs·ρ, ρ = load/CapacityRPS.
	TTFTBaseMs  float64 `json:"ttft_base_ms"`
	TTFTQueueMs float64 `json:"ttft_queue_ms"`
	TBOTBaseMs  float64 `json:"tbot_base_ms"`
	TBOTSlopeMs float64 `json:"tbot_slope_ms"`
}

// ClusterPlan is one cluster's part of a solution.
type ClusterPlan struct {
	Cluster      string             `json:"cluster"`
	DemandRPS    float64            `json:"demand_rps"`
	ShedFraction float64            `json:"shed_fraction"`
	Weights      map[string]float64 `json:"weights"`
}

// Routing is the snapshot a data plane serves for one cluster.
type Routing struct {
	Cluster      string             `json:"cluster"`
	Ready        bool               `json:"ready"`
	Version      uint64             `json:"version"`
	AgeSeconds   float64            `json:"age_seconds"`
	Stale        bool               `json:"stale"`
	ShedFraction float64            `json:"shed_fraction"`
	Weights      map[string]float64 `json:"weights"`
	// ShedTotal and RefusedTotal count the requests the data plane has
	// refused since it started, by reason: the snapshot's shed fraction
	// and local admission.
	ShedTotal    int64          `json:"shed_total"`
	RefusedTotal int64          `json:"refused_total"`
	Engines      []RoutedEngine `json:"engines,omitempty"`
	// Classes are the weights per model (and prompt band) in a fleet of
	// more than one request class: GET /v1/routing's classes.
	Classes []RoutedClass `json:"classes,omitempty"`
}

// RoutedClass is one request class's weights in a cluster's snapshot.
type RoutedClass struct {
	Model           string             `json:"model"`
	MinPromptTokens int                `json:"min_prompt_tokens,omitempty"`
	MaxPromptTokens int                `json:"max_prompt_tokens,omitempty"`
	Weights         map[string]float64 `json:"weights"`
	ShedFraction    float64            `json:"shed_fraction"`
}

// RoutedEngine is the data plane's live view of one engine of a cluster.
type RoutedEngine struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"` // why not available
	InFlight  int64  `json:"in_flight"`
	Picks     int64  `json:"picks"`
}

// EngineStats are one engine's latest windowed features, measured at the
// engine (no network).
type EngineStats struct {
	Name          string    `json:"name"`
	Requests      int64     `json:"requests"` // completions in the window
	LoadRPS       float64   `json:"load_rps"`
	InFlight      float64   `json:"in_flight"`
	TTFTP50Ms     float64   `json:"ttft_p50_ms"`
	TTFTP99Ms     float64   `json:"ttft_p99_ms"`
	TBOTP50Ms     float64   `json:"tbot_p50_ms"`
	TBOTP99Ms     float64   `json:"tbot_p99_ms"`
	CacheHitRatio float64   `json:"cache_hit_ratio"`
	Utilization   float64   `json:"utilization"`
	Healthy       bool      `json:"healthy"`
	WindowEnd     time.Time `json:"window_end"`
}

// TrafficCluster is the traffic generator's view of one cluster:
// cumulative counters, which the console turns into rates.
type TrafficCluster struct {
	Cluster      string  `json:"cluster"`
	DemandRPS    float64 `json:"demand_rps"` // target request rate now
	Multiplier   float64 `json:"multiplier"` // demand swing in force
	Sent         int64   `json:"sent"`
	OK           int64   `json:"ok"`
	Good         int64   `json:"good"` // answered within the SLO
	Shed         int64   `json:"shed"`
	Errors       int64   `json:"errors"`
	Dropped      int64   `json:"dropped"`
	InFlight     int64   `json:"in_flight"`
	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	TTFTP50Ms    float64 `json:"ttft_p50_ms"`
	TTFTP99Ms    float64 `json:"ttft_p99_ms"`
	TBOTP50Ms    float64 `json:"tbot_p50_ms"`
	TBOTP99Ms    float64 `json:"tbot_p99_ms"`
	PromptTokens int64   `json:"prompt_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	FollowUps    int64   `json:"follow_ups"`
	SameEngine   int64   `json:"same_engine"`
}
