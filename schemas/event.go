package schemas

// EventSchemaVersion is the version of the signal event wire format written
// by this package. Decoders accept versions up to and including it.
const EventSchemaVersion = 1

// EventKind says which payload an Event carries.
type EventKind uint8

// Event kinds. Zero is invalid so that a zeroed event never validates.
const (
	KindStatus     EventKind = 1 // periodic engine status
	KindCompletion EventKind = 2 // one finished (or failed) request
)

// Health is an engine's self-reported or probed health.
type Health uint8

// Health values.
const (
	HealthUnknown   Health = 0
	HealthHealthy   Health = 1
	HealthDegraded  Health = 2
	HealthUnhealthy Health = 3
)

// EngineStatus is the periodic status an engine (or its adapter) publishes.
type EngineStatus struct {
	Engine             string  // engine name, as in the fleet file
	TimeUnixNano       int64   // event time
	Health             Health  //
	ReadyReplicas      uint32  // replicas able to take requests now
	TotalReplicas      uint32  // replicas configured
	Running            uint32  // requests in the running batch
	Waiting            uint32  // requests queued, not yet in a batch
	KVCacheUtilization float64 // fraction of KV cache blocks in use, 0..1
}

// Completion describes one request an engine finished or failed.
type Completion struct {
	Engine             string  // engine name
	TimeUnixNano       int64   // event time: when the request finished
	ConversationID     string  // affinity key, may be empty
	Cluster            string  // front-end cluster that sent it, may be empty
	PromptTokens       uint32  //
	CachedPromptTokens uint32  // prompt tokens served from the KV cache
	OutputTokens       uint32  //
	TTFTMs             float64 // time to first token
	TBOTMs             float64 // mean time between output tokens
	Error              string  // empty when the request succeeded
	Model              string  // model the request named (its class, with PromptTokens); may be empty
}

// Event is one signal event: exactly one of Status or Completion is
// meaningful, as Kind says. It is a value type (no pointers to payloads) so
// a decoder can reuse one Event without allocating.
type Event struct {
	Kind       EventKind
	Status     EngineStatus
	Completion Completion
}
