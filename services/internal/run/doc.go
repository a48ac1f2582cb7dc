// Package run composes long-running components the way every ilb service
// and the ilb binary do: each component is a Run(ctx) error; the first to
// return stops the rest; shutdown is bounded. It also serves the HTTP
// health endpoint, wraps http.Server with the limits every ilb server
// uses, and gives the dependencies every service takes (logger, meter,
// tracer, propagator, health, clock) the same defaults everywhere (Deps).
//
// # Concurrency
//
// A Group is built on one goroutine and then Run once. Health is safe for
// concurrent use: components flip their readiness with atomics while the
// HTTP handler reads them.
package run
