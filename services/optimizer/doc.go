// Package optimizer is ilb's weight path: it turns what the fleet is doing
// into versioned weight snapshots. It reads windowed features and fitted
// profiles (Arrow tables on Kafka) and the fleet file, estimates each
// front-end cluster's demand, derates unhealthy and failing engines,
// solves the allocation (solver/optimize) from the previous solution so
// weights move no more than they must, checks the answer, updates each
// cluster's selection table with minimal churn (solver/sched), and
// publishes one snapshot per cluster plus a manifest to the JetStream KV
// bucket ilb-weights.
//
// Publishing follows the manifest protocol (Publisher, README.md): a
// publisher claims version v = manifest.version + 1 by a compare-and-swap
// on the manifest, then writes every cluster key with a compare-and-swap
// that never replaces a version v or later. Two optimizers (or an
// operator's rollback) therefore never publish the same version twice or
// make a key's version go down. A leader lease in the same bucket keeps
// standbys from solving for nothing; correctness never depends on it.
// `ilb weights history` and `ilb weights rollback` use Publisher too.
//
// # Concurrency
//
// Run starts one goroutine per input topic (decoding records and sending
// them on a channel), one for the lease, and the solve loop, which owns all
// solve state (inputs, demand averages, the last published snapshots and
// tables): nothing else touches it, so it needs no lock. The loop
// publishes an immutable State through an atomic pointer; State, Trigger
// and Handler are safe for concurrent use. Trigger is a non-blocking send
// on a capacity-1 channel, so triggers coalesce. A Publisher is safe for
// concurrent use. No goroutine outlives Run.
package optimizer
