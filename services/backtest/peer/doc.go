// Package peer holds the routers ilb is compared with in `ilb backtest`:
// faithful re-implementations of the peer routers as their authors ship
// them (llm-d's endpoint picker, Dynamo's KV router, SGLang's cache-aware
// router, AIBrix's prefix-cache policy) and the classic algorithms
// operators run (bounded-load consistent hashing, power of two choices,
// least-loaded with SLO admission). Each policy is one file; the
// simulator (services/backtest) calls them through the small interface
// in peer.go.
//
// A policy runs as one independent Router per front-end cluster, the
// deployment the seed's talk describes: several front-ends converging on
// one engine pool, none seeing another's decisions. A Router sees only the
// signals the real router has: engine metrics it polls (with their
// staleness, through Poller), or its own routing counts (Dispatch,
// FirstToken, Completed). Prefix blocks are the trace's own block hashes
// (Request.Blocks, Fleet.BlockTokens tokens each, prefix-chained: equal
// ids mean equal prefixes); each policy's file says how the router's own
// block size maps onto them.
//
// # Concurrency
//
// A Router is owned by one simulation's goroutine; the package has no
// goroutines, no globals and no clock: time comes in through View, and
// randomness from the seed New is given.
package peer
