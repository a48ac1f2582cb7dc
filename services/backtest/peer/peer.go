package peer

import "time"

// Results of Router.Pick other than an engine index.
const (
	// Shed refuses the request (admission control).
	Shed = -1
	// NoEngine fails the request: nothing it may use is available.
	NoEngine = -2
	// Defer holds the request at the router; the simulator offers it
	// again (Pick, oldest first) after each FirstToken or Completed of the
	// same Router, as a router queue releasing work when load drops.
	Defer = -3
)

// Fleet is what every router knows of the fleet, fixed for a run.
type Fleet struct {
	Engines  []Engine
	Clusters []Cluster
	// BlockTokens is the number of tokens in one Request.Blocks entry.
	BlockTokens int
	// TTFTSLOMs is the fleet file's ttft_slo_ms (for admission policies).
	TTFTSLOMs float64
}

// Engine is one engine of the fleet as routers are configured with it.
type Engine struct {
	Name   string
	Region string
	// Slots is the engine's batch size over its replicas (max_batch ×
	// replicas): the most requests it runs at once.
	Slots int
	// KVCacheTokens is its KV memory over its replicas, in tokens.
	KVCacheTokens int
	// PrefillTokensPerS is its prefill rate over its replicas.
	PrefillTokensPerS float64
	// MaxBatchedTokens is its per-step token budget with chunked prefill
	// (vLLM's max_num_batched_tokens); 0 when unknown.
	MaxBatchedTokens int
}

// Cluster is one front-end cluster.
type Cluster struct {
	Name   string
	Region string
	// Eligible lists the engines the cluster may use, in fleet order.
	Eligible []int32
	// NetworkMs is the request overhead to each engine, by engine index
	// (NaN for an engine the cluster may not use).
	NetworkMs []float64
	// Blocks is how many distinct Request.Blocks hashes the cluster's
	// requests carry (0: unknown): a bound on a prefix index's entries,
	// so a router can size its index once instead of growing it.
	Blocks int
}

// Request is one request as a router sees it.
type Request struct {
	// ID identifies the request within the run (its index in the trace).
	ID int
	// Cluster is the index of the front-end cluster it arrived at.
	Cluster int
	// Key is the hash of its conversation's affinity key.
	Key uint64
	// PromptTokens and OutputTokens are its sizes; a router may use the
	// prompt's size (it has the text) but not its output (unknown ahead).
	PromptTokens int
	OutputTokens int
	// Blocks are the prompt's prefix block hashes, Fleet.BlockTokens
	// tokens each (the last may be partial), prefix-chained.
	Blocks []uint64
}

// Metrics is one engine's state as its /metrics endpoint reports it.
type Metrics struct {
	Running int     // requests running (vllm:num_requests_running)
	Waiting int     // requests queued (vllm:num_requests_waiting)
	KVUsage float64 // KV cache blocks held by running requests, 0..1 (vllm:kv_cache_usage_perc)
	Healthy bool
}

// View is the simulation's state as a Router may read it.
type View interface {
	// Now is the simulated time in ns.
	Now() int64
	// Candidates lists the engines the router may send a request of its
	// cluster to now, in fleet order: the eligible engines (with the
	// :local suffix, those of the cluster's region while any of them is
	// healthy) that the router knows to be healthy. dst is reused.
	Candidates(dst []int32) []int32
	// Members lists the same engines without the health filter: the
	// router's configured workers.
	Members() []int32
	// CachedBlocks is how many leading blocks of blocks engine e holds in
	// its prefix cache now: what a router that follows the engines' KV
	// events (blocks stored and removed, Dynamo's default) knows, taken
	// as delivered at once. It does not touch the cache.
	CachedBlocks(e int, blocks []uint64) int
	// PrefillBacklog is the prompt tokens engine e has yet to prefill for
	// the requests sent to it that have not produced their first token,
	// less the prefix each found cached when it was sent. It is live
	// engine state, for the reference admission policy only
	// (jsq-admission); it is tracked only for a Router that implements
	// BacklogReader, and is 0 otherwise.
	PrefillBacklog(e int) int64
	// InFlight is the requests in flight on engine e now, sent by every
	// front end (running and queued): live state, as services/backtest's
	// least-loaded sees it, for the reference admission policy only.
	InFlight(e int) int
}

// Router is one front-end cluster's instance of a policy.
type Router interface {
	// Pick returns the engine for r (an index into Fleet.Engines, one of
	// Candidates), or Shed, NoEngine or Defer. The simulator submits r to
	// the engine at once.
	Pick(v View, r *Request) int
}

// The optional hooks below are one-method interfaces a Router implements
// when the router they model has that signal.

// FirstTokenObserver learns when a request it routed produced its first
// token (the router sees the response stream start).
type FirstTokenObserver interface {
	FirstToken(v View, r *Request, engine int)
}

// CompletionObserver learns when a request it routed finished or failed.
type CompletionObserver interface {
	Completed(v View, r *Request, engine int, failed bool)
}

// BacklogReader marks a Router that reads View.PrefillBacklog, so that
// the simulator tracks it (a prefix-cache lookup per request routed).
type BacklogReader interface {
	ReadsBacklog()
}

// Poller reads every engine's metrics every PollInterval, as a router that
// scrapes /metrics does. m is indexed by engine and valid only during the
// call. The simulator skips the polls that would see what the last one saw
// (nothing happened since), so a Poll that repeats the last must change
// nothing: the router keeps the metrics, not when or how often it polled.
type Poller interface {
	PollInterval() time.Duration
	Poll(v View, m []Metrics)
}

// Policy builds a policy's routers.
type Policy struct {
	// Name is the policy's name in `ilb backtest --policy`.
	Name string
	// About is one line for --help and the README.
	About string
	// New returns the router of cluster c. seed makes its random choices
	// repeatable; each cluster's router gets its own.
	New func(f *Fleet, c int, seed uint64) (Router, error)
}
