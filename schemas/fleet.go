package schemas

// Fleet is the fleet file (YAML): one format for `ilb dev`, `ilb backtest`
// and the services. The YAML field names are a public contract.
type Fleet struct {
	MaxUtilization float64 `yaml:"max_utilization"`
	BlockTokens    int     `yaml:"block_tokens"` // size of one KV block
	// NetworkMs is region -> region request overhead in milliseconds; a
	// missing reverse direction is taken as symmetric.
	NetworkMs map[string]map[string]float64 `yaml:"network_ms"`
	Clusters  []FleetCluster                `yaml:"clusters"`
	Engines   []FleetEngine                 `yaml:"engines"`
	// Extra, optional fields.
	// TTFTSLOMs and TBOTSLOMs are the service-level objective: the time to
	// first token (network included) and the mean time between output
	// tokens a request may see. Goodput (SLO attainment) is judged by
	// them, TTFTSLOMs is also the TTFT at which an engine counts as full.
	TTFTSLOMs        float64 `yaml:"ttft_slo_ms,omitempty"`
	TBOTSLOMs        float64 `yaml:"tbot_slo_ms,omitempty"`
	MeanOutputTokens float64 `yaml:"mean_output_tokens,omitempty"` // default for the solver
	ShedPenaltyMs    float64 `yaml:"shed_penalty_ms,omitempty"`
	TotalDemandRPS   float64 `yaml:"total_demand_rps,omitempty"` // dev traffic generator
	// DefaultModel is the model of trace lines and requests that name
	// none, and the model of engines that list none (fleet_models.go).
	DefaultModel string `yaml:"default_model,omitempty"`
}

// FleetCluster is one front-end (CPU) cluster.
type FleetCluster struct {
	Name        string  `yaml:"name"`
	Region      string  `yaml:"region"`
	DemandShare float64 `yaml:"demand_share"`
	Residency   string  `yaml:"residency,omitempty"` // if set, only engines with the same residency
	// ModelShares splits the cluster's demand over models, for `ilb dev`
	// and traces without a model (relative shares; fleet_models.go).
	ModelShares map[string]float64 `yaml:"model_shares,omitempty"`
}

// FleetEngine is one GPU engine (a serving deployment).
type FleetEngine struct {
	Name              string     `yaml:"name"`
	Region            string     `yaml:"region"`
	SKU               string     `yaml:"sku"`
	Residency         string     `yaml:"residency,omitempty"`
	PrefillTokensPerS float64    `yaml:"prefill_tokens_per_s"`
	DecodeStepMs      DecodeStep `yaml:"decode_step_ms"`
	MaxBatch          int        `yaml:"max_batch"`
	KVCacheTokens     int        `yaml:"kv_cache_tokens"`
	Replicas          int        `yaml:"replicas,omitempty"` // default 1
	// Scheduler is the engine's iteration model: SchedulerChunked (vLLM
	// V1's chunked prefill, the default) or SchedulerWhole (whole-prompt
	// prefill iterations that stop decoding).
	Scheduler string `yaml:"scheduler,omitempty"`
	// MaxNumBatchedTokens is chunked prefill's per-step token budget
	// (vLLM's max_num_batched_tokens); 0 takes vLLM's default for the
	// SKU (8192 on h100, 2048 on a100, else 8192).
	MaxNumBatchedTokens int `yaml:"max_num_batched_tokens,omitempty"`
	// URL is the engine's OpenAI-compatible base URL (the proxy appends
	// /v1/chat/completions). Optional: `ilb dev` and engine-sim fill it in.
	URL string `yaml:"url,omitempty"`
	// Models are the model names the engine serves, as its /v1/models
	// lists them. Absent: the fleet's default_model, or the one implicit
	// model of a fleet whose engines list none (fleet_models.go).
	Models []string `yaml:"models,omitempty"`
	// MaxContextTokens is the longest prompt the engine accepts; 0
	// (absent) is no limit.
	MaxContextTokens int `yaml:"max_context_tokens,omitempty"`
}

// DecodeStep is the time of one decode step at batch size b:
// Base + PerSeq*b milliseconds.
type DecodeStep struct {
	Base   float64 `yaml:"base"`
	PerSeq float64 `yaml:"per_seq"`
}
