package schemas

// Feature is one row of the feature table: what the aggregator saw of one
// engine (Cluster empty) or of one cluster-engine pair (Cluster set) in one
// event-time window. Latencies are milliseconds, rates per second.
type Feature struct {
	WindowStartUnixNano int64
	WindowEndUnixNano   int64
	Engine              string
	Cluster             string // empty for the engine-level row
	// Class is the request class of a (cluster, class, engine) row: the
	// key of its model and prompt band (ModelClass.Key), empty for engine
	// rows and in a fleet of one class.
	Class string

	Requests      uint64  // completions seen in the window
	Errors        uint64  // completions with an error
	ArrivalRPS    float64 // completions per second (throughput, served load)
	InFlight      float64 // mean running+waiting from status events
	TTFTP50Ms     float64
	TTFTP90Ms     float64
	TTFTP99Ms     float64
	TBOTP50Ms     float64
	TBOTP90Ms     float64
	TBOTP99Ms     float64
	ErrorRate     float64 // Errors / Requests
	CacheHitRatio float64 // cached prompt tokens / prompt tokens
	Utilization   float64 // mean running / max batch (engine level), 0..1+
	KVCacheUtil   float64 // mean KV cache utilisation
	ReadyReplicas uint32  // last seen
	Healthy       bool    // last seen health was healthy
	StatusEvents  uint64  // status events in the window
	LateEvents    uint64  // events that arrived after the window closed (counted, not applied)

	// The mean request of the window's completions without error: prompt
	// and output tokens, and the mean square of the uncached prompt tokens
	// (prompt − cached). With CacheHitRatio they are the request shape the
	// optimizer sizes an engine's prior profile for (solver/prior.Shape).
	// 0 without such completions, and in records of older writers.
	PromptTokensMean float64
	OutputTokensMean float64
	UncachedSqMean   float64
}

// Profile is one row of the profile table: a fitted latency-versus-load
// profile for one engine (or one SKU when Engine is empty), in the form
// the solver consumes (DESIGN.md, ilb solve).
type Profile struct {
	Engine           string
	SKU              string
	FittedAtUnixNano int64
	CapacityRPS      float64 // saturation load: the solver's capacity_rps (ρ = λ/CapacityRPS)
	SLOCapacityRPS   float64 // load at which TTFT reaches the fleet's TTFT SLO (≤ CapacityRPS; 0 = unknown)
	TTFTBaseMs       float64
	TTFTQueueMs      float64
	TBOTBaseMs       float64
	TBOTSlopeMs      float64
	TTFTR2           float64 // coefficient of determination of the TTFT fit
	TBOTR2           float64
	Samples          uint64  // windows used
	LoadMinRPS       float64 // range of load the fit saw
	LoadMaxRPS       float64
}
