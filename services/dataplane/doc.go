// Package dataplane is ilb's front-end data plane: it caches each front-end
// cluster's weight snapshot, picks an engine per request from the
// snapshot's selection table, applies local guardrails (engine health and
// ready replicas, outlier ejection, bounded-load spill, load shedding,
// client-side throttling, a retry budget) and proxies OpenAI-compatible
// chat completions, completions and embeddings to the picked engine,
// streaming included. Requests without a conversation id or user get an
// affinity key derived from their prompt (services/internal/affinity).
// In a fleet whose engines list models, a request is picked within the
// table of its class (its model and estimated prompt length; models.go),
// and never reaches an engine that does not serve it, whatever a snapshot
// says.
//
// Snapshots come from the JetStream KV bucket (one key per cluster), from a
// JSON file reloaded on change, or from SetSnapshot. Every snapshot is
// validated before it is swapped in and only newer versions are applied; a
// rejected one is counted and logged and the previous one keeps serving.
// README.md documents the guardrails, the staleness fallback, the metrics
// and the file-reload rule.
//
// # Concurrency
//
// The request path takes no lock. Each cluster holds its current picker in
// a typed atomic.Pointer: an immutable value carrying the snapshot version,
// the selection table, the engine availability mask, the shed fraction and
// the per-engine load shares. The empty state is a real picker that
// returns ErrNoSnapshot. Hot-path counters, in-flight counts, the
// conversation memory and the retry and throttle windows are atomics.
//
// Every state change (a snapshot, an engine status, an ejection, staleness)
// runs under one mutex, DataPlane.mu, and ends by building new pickers and
// storing them; functions that need it held end in Locked. The mutex plays
// the role of grpc-go's serializer goroutine, so that SetSnapshot works
// without a running owner loop (tests, `ilb dev` preloading). Run's
// goroutines (the owner tick, the snapshot source, the status consumer,
// the probes) all return before Run does.
package dataplane
