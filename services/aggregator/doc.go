// Package aggregator is ilb's aggregator service: it consumes the signals
// topic in a Kafka consumer group, turns signal events into event-time
// windowed features (streams/window), publishes each window as an Arrow
// record batch to ilb.features (and to Arrow IPC files), routes records it
// cannot use to ilb.signals.dlq, and periodically fits each engine's and
// each SKU's latency-versus-load profile (solver/regress) from the feature
// history, publishing the accepted ones to ilb.profiles. README.md
// documents topics, headers, files, HTTP endpoints, metrics and the exact
// delivery guarantee.
//
// # Partitions, windows and commits
//
// ilb.signals is keyed by engine, so all events of an engine are on one
// partition. Each owned partition has its own windows and watermark: what
// a partition's windows hold depends only on its records, in order, not on
// which instance owns it or how fetches of partitions interleave. Several
// instances in one group therefore split the work by partition and
// produce the same rows one instance would (per-cluster rows are per
// (engine, cluster) pair, so complete on the engine's partition).
//
// Offsets are committed by hand, never automatically: a partition's
// commit is the oldest offset a window not yet emitted still needs (or,
// with none, one past the last record), and it is committed only after
// every record emitted before it (features and DLQ) is acknowledged. The
// window checkpoint (streams/window) travels with the offset, as the
// commit's metadata, so it is stored atomically with it. A new owner of
// the partition restores the checkpoint, re-reads from the commit, and
// the re-read records rebuild exactly the windows they went to and no
// others: a restart or a replayed stretch never double counts. Every
// instance reads back what the group published (readback.go), so a new
// owner does not publish again what its predecessor published after its
// last commit, and the owner of partition 0 fits profiles for the group on
// the windows of every partition (fitter.go).
//
// # Concurrency
//
// Run's consumer goroutine owns the window state; franz-go's group
// callbacks (assign, revoke, lose) take the same mutex, Aggregator.mu,
// and with BlockRebalanceOnPoll they never run while a batch is being
// handled. The profile loop owns the profiler and reads the history (its
// own mutex). HTTP handlers read immutable views through atomic
// pointers; counters are atomics read by the metrics callback. The
// read-back goroutine owns its client and guards what it learns with its
// own mutex (taken after Aggregator.mu, never before). Every goroutine
// Run starts ends before it returns.
package aggregator
