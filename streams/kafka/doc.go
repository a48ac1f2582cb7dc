// Package kafka is ilb's franz-go wiring: client configuration (TLS,
// SASL PLAIN and SCRAM), an idempotent producer with bounded buffering and
// failure counters, a consumer-group loop that commits offsets only for
// records its handler finished, topic creation that tolerates existing
// topics, and OpenTelemetry trace context carried in record headers.
//
// It moves bytes; what the bytes mean (signal events, feature batches)
// belongs to schemas and to the services.
//
// # Delivery
//
// Producing is at-least-once: the producer is idempotent (no duplicates
// from its own retries) and waits for all in-sync replicas. Consuming is
// at-least-once: RunGroup marks a polled batch for commit only after the
// handler returns nil, commits marks periodically, when partitions are
// revoked and on exit. A handler error ends RunGroup without committing
// that batch, so the next member of the group (or the next RunGroup) gets
// those records again; handlers must tolerate redelivery.
//
// # Concurrency
//
// A Producer is safe for concurrent use; its error callback runs on
// franz-go's goroutines. RunGroup calls its handler from one goroutine,
// never concurrently, and returns only after its client is closed. The
// trace helpers are pure functions of their arguments.
package kafka
