// Package adapter lets ilb front real engines: it scrapes each engine's
// Prometheus /metrics (vLLM, or SGLang where its names differ) every
// Interval and publishes the same signal events the simulated engines
// do, to Kafka (ilb.signals, keyed by engine name) and an optional hook.
//
// Each scrape gives a status event (running and waiting requests, KV
// cache use, replicas; unhealthy with no ready replica when the scrape
// fails). Engines export no per-request records, so completions are
// synthesized from what the counters and histograms grew by between two
// scrapes: one event per finished request, with the interval's mean
// tokens and latencies spread over the interval's histogram quantiles.
// Such records carry the Kafka header ilb-synthetic: metrics, and no
// conversation or cluster. README.md has the metric names read and the
// mapping; testdata/ holds /metrics bodies in the engines' format.
//
// # Concurrency
//
// Run starts one goroutine per target, which owns that target's previous
// sample; they share the Kafka producer (safe for concurrent use) and
// call Config.OnEvent concurrently. Run returns after all of them have
// stopped. Parse, Diff and Completions are pure functions.
package adapter
