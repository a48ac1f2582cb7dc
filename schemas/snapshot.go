package schemas

import "time"

// Snapshot is the weight snapshot for one front-end cluster: the value of
// that cluster's key in the ilb-weights KV bucket, and the file format of
// `ilb dataplane --snapshot`. The JSON field names are a public contract.
type Snapshot struct {
	Version      uint64             `json:"version"`       // strictly increasing fleet-wide
	Cluster      string             `json:"cluster"`       // front-end cluster name
	CreatedAt    time.Time          `json:"created_at"`    // when the optimizer made it
	Weights      map[string]float64 `json:"weights"`       // engine -> fraction of this cluster's traffic
	ShedFraction float64            `json:"shed_fraction"` // fraction of traffic to shed; weights sum to 1 - this
	// Table is the selection table computed by the optimizer from the
	// previous table with minimal churn. Optional: a snapshot without one
	// is still valid and the data plane builds the table from Weights.
	Table *SnapshotTable `json:"table,omitempty"`
	// InputsDigest identifies the inputs of the solve, for debugging.
	InputsDigest string `json:"inputs_digest,omitempty"`
	// InputsAsOf is the event time of the newest feature window the solve
	// saw: with the optimizer's event clock, two runs over the same signal
	// stream publish the same weights for the same InputsAsOf.
	InputsAsOf time.Time `json:"inputs_as_of,omitzero"`
	// QueueLimits are the data plane's local admission limits: for each
	// engine, how many requests may wait at it for a new one still to
	// start within the TTFT SLO (services/internal/routing.QueueLimit).
	// Optional: without them the data plane admits everything.
	QueueLimits map[string]float64 `json:"queue_limits,omitempty"`
	// PrefillLimits are the data plane's other admission limits: for each
	// engine, how many prompt tokens may be queued for prefill ahead of a
	// new request for it still to start within the TTFT SLO (prefill rate
	// × replicas × ttft_slo_ms; services/internal/routing.PrefillLimit).
	// Optional: without them only the queue limits apply.
	PrefillLimits map[string]float64 `json:"prefill_limits,omitempty"`
	// Classes are the weights of each request class (a model and a band
	// of prompt lengths, fleet_models.go) of a fleet with more than one
	// class; the top-level weights are then their demand-weighted mix,
	// for readers that know no classes. Optional: a class not listed, or
	// a snapshot without classes, routes by the top-level weights, within
	// the engines that serve the class.
	Classes []SnapshotClass `json:"classes,omitempty"`
}

// SnapshotClass is one request class's part of a snapshot: its weights,
// shed fraction and selection table, as the top level has them for a
// fleet of one class. The class is identified by its model and the upper
// end of its band (0: none).
type SnapshotClass struct {
	Model           string             `json:"model"`
	MinPromptTokens int                `json:"min_prompt_tokens,omitempty"` // band's lower end, exclusive
	MaxPromptTokens int                `json:"max_prompt_tokens,omitempty"` // band's upper end, inclusive; 0: none
	Weights         map[string]float64 `json:"weights"`
	ShedFraction    float64            `json:"shed_fraction"`
	Table           *SnapshotTable     `json:"table,omitempty"`
}

// Class returns the class of s with the given model and band upper end.
func (s *Snapshot) Class(model string, maxPromptTokens int) (*SnapshotClass, bool) {
	for i := range s.Classes {
		if k := &s.Classes[i]; k.Model == model && k.MaxPromptTokens == maxPromptTokens {
			return k, true
		}
	}
	return nil, false
}

// SnapshotTable carries a selection table compactly. Engines lists the
// engine names the encoded slots refer to by index; Data is the slot
// assignment encoded by solver/sched (see schemas/README.md); JSON carries
// it as base64.
type SnapshotTable struct {
	Slots    int      `json:"slots"`    // number of slots, a power of two
	Encoding string   `json:"encoding"` // encoding of Data, e.g. "rle-uvarint-v1"
	Engines  []string `json:"engines"`  // index -> engine name
	Data     []byte   `json:"data"`     // encoded slot owners
}

// Manifest is the value of the manifest key in the weights bucket: the
// fleet-wide version and the clusters published at that version.
type Manifest struct {
	Version   uint64            `json:"version"`
	CreatedAt time.Time         `json:"created_at"`
	Clusters  map[string]uint64 `json:"clusters"` // cluster -> version of its latest snapshot
	Leader    string            `json:"leader,omitempty"`
}
