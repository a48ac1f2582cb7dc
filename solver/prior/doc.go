// Package prior predicts an engine's latency-versus-load profile (the
// solver's optimize.Engine) from its engine-model parameters
// (solver/engine.Params), for an engine whose profile has not been fitted
// from its signals yet: a cold start. The optimizer service and the
// backtester both call Profile, so they start from the same prior.
//
// It is pure: no I/O, no clock, no randomness; it imports only the
// standard library and ilb's solver packages.
//
// # Concurrency
//
// Profile is a pure function, safe for concurrent use.
package prior
