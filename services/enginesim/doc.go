// Package enginesim runs simulated LLM engines that behave like real
// servers: each serves OpenAI-compatible chat completions (streaming
// too) at http://ADDR/engines/NAME, takes as long as the shared engine
// model (solver/engine: continuous batching, prefill reduced by KV prefix
// hits from an LRU block cache, decode steps slowing with batch size)
// says, and publishes a status event per engine every StatusInterval and a
// completion event per request to Kafka (ilb.signals, keyed by engine) and
// to an optional in-process hook. Faults can be injected over HTTP or
// with InjectFault: slow down, fail a fraction of requests, go unhealthy,
// lose replicas.
//
// The model runs in wall-clock time scaled by Config.TimeScale. A prompt
// is the chat messages under a fixed template, one token per four bytes,
// cut into chained-hash blocks so that a follow-up turn repeating the
// earlier messages hits the engine's prefix cache. README.md documents the
// HTTP API, the token and block rules, the events and the metrics.
//
// # Concurrency
//
// Each engine's model belongs to one owner goroutine started by Run. HTTP
// handlers send it their request on a channel and wait on a per-request
// channel for the first token and the result; fault injection is a
// request-reply on another channel. The owner publishes the engine's
// state into atomics after every change, which the handlers, GET /engines
// and the metrics callback read without locking. Kafka producing never
// blocks the owner: records beyond the producer's buffer are dropped and
// counted. Run returns after every owner and handler it started has
// stopped; Config.OnEvent is called from several owners at once.
package enginesim
