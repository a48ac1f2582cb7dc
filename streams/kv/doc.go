// Package kv is ilb's JetStream key-value wiring: connecting to NATS with
// endless reconnects, creating the weights bucket, publishing with
// compare-and-swap on the key's revision, watching keys across
// reconnects, and reading a key's history for rollbacks.
//
// # Credentials and errors
//
// Config takes a creds file (JWT), an NKey seed, or a user and password
// (in the URL, or apart from it so it stays off command lines). A server
// that refuses them closes the connection; with RetryOnFailedConnect that
// happens after Connect returned, so the close is logged at Error with the
// server's reason and a hint, and ConnError reports it for health pages.
// A write the server refuses for lack of permission comes back from Put
// and EnsureBucket as ErrNotPermitted with the refused subject, rather
// than as the bare timeout nats.go reports.
//
// # Trace context
//
// The JetStream KV API takes no message headers on Put and exposes none
// on Get or Watch, so trace context cannot ride on KV entries through this
// API; a value that needs one carries it in its own encoding (see schemas).
// HeaderCarrier carries it on plain NATS messages.
//
// # Watching and duplicates
//
// Watch delivers the latest value of every matching key, then calls
// initialDone once, then delivers updates. Use RewatchOnReconnect so that
// a restarted server is noticed at once rather than after tens of seconds. When the watcher has to be
// re-created (the connection came back, or the subscription ended), the
// latest values are delivered again, so a consumer must apply an entry
// only if it is newer than what it has (by revision, or by the version
// inside the value) and treat the rest as duplicates.
//
// # Clusters
//
// Config.URL may name every node of a cluster; the connection moves to
// another node when its own goes away, or stops answering pings
// (PingInterval, MaxPingsOut: 10 s × 2 by default, not nats.go's 2 min).
// A watcher whose ordered consumer lived on a node that went away gets
// nothing more until nats.go misses its heartbeats (about 20 s); for a
// single key Watch reads the key every StallCheck (2 s) and re-creates a
// watcher that is behind for a whole period, so the next write arrives
// within about 4 s (TestWatchAcrossClusterNodeLoss).
//
// # Concurrency
//
// Functions are safe for concurrent use with distinct or shared
// connections. Watch calls its callback from one goroutine, never
// concurrently, and returns only after its watcher is stopped.
package kv
