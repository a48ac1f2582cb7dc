// Package sched turns a cluster's engine weights into a per-request pick:
// the selection table, its minimal-churn update, its compact encoding, and
// the lookups the data plane and the backtester run per request. It is
// pure (no I/O, no clock, no randomness, no mutable globals), imports only
// the standard library, and is deterministic across processes and
// platforms, so the optimizer, every data plane replica and the
// backtester pick alike from the same inputs.
//
// A Table is an array of slots (DefaultSlots = 65,536), each owned by one
// engine; an engine's share of the slots is its weight rounded to slot
// granularity by the largest remainder method. A key (conversation id) is
// hashed with HashKey (wyhash v4, fixed seed) and its engine is the owner
// of slot hash & (slots−1): one hash and one array read, about 6 ns.
//
// Build lays a table out from weights alone. Table.Update derives the next
// table from the previous one, moving exactly Σ max(0, old − new count)
// slots: the minimum, so the share of conversations that lose their KV
// cache equals the total variation distance between old and new slot
// shares. Stateless schemes move more: rebuilding the table moves 3-12x
// the minimum, weighted rendezvous hashing 1.2-1.7x (BenchmarkChurn).
// The optimizer carries the updated table in the snapshot (Table.Encode,
// "rle-uvarint-v1"); a data plane decodes it (Decode) or, for a snapshot
// without one, updates its current table itself (Rebalance) and gets the
// same bytes.
//
// For the guardrails, Table.PickSkip gives a key's next choice when its
// engine is unavailable, the same on every replica, and ShedKey picks the
// keys to shed consistently. README.md documents the encoding and the
// measured figures.
//
// # Concurrency
//
// A Table is immutable once built; all its methods are safe for concurrent
// use, and a new table is swapped in by replacing the pointer (for example
// with atomic.Pointer). Build, Update and Decode allocate a new table and
// never modify their inputs. An Updater is working memory for one
// goroutine at a time (or under the caller's lock); the tables it returns
// share nothing with it. Pick, PickHash, PickSkip, HashKey and ShedKey
// do not allocate.
package sched
