// Package traffic is ilb's load generator for the local fleet (`ilb dev`)
// and the integration tests: per front-end cluster it starts new
// multi-turn conversations as a Poisson process whose rate follows a
// demand profile (the fleet's demand share times a swing schedule such as
// "fe-east ×3 between 60 s and 180 s of every 5 minutes"), and plays each
// conversation turn by turn against a data plane's POST
// /v1/chat/completions with the X-Ilb-Cluster and X-Conversation-Id
// headers.
//
// A turn's prompt is the whole conversation so far, earlier messages
// verbatim (so an engine that served the previous turn finds the prefix in
// its KV cache), plus a new user message of random length; max_tokens is
// random too. Everything a conversation will do (its arrival, number of
// turns, message lengths and text, think times) is drawn from the seed
// when it arrives, so a run is deterministic given the seed up to the
// timing of the responses. Stats reports what was sent and what came back:
// served, served within the SLO (good), shed (429), errors, drops when the
// in-flight bound is reached, latency, time to first token and mean time
// between tokens, the engines that served each cluster and how often a
// follow-up turn landed on the previous turn's engine.
//
// # Concurrency
//
// Run starts one arrival goroutine per cluster and one goroutine per live
// conversation, bounded by Config.MaxConversations; in-flight requests are
// bounded by a semaphore of Config.MaxInFlight. Counters are atomics; the
// recent-latency rings and the per-engine counts sit behind one mutex per
// cluster. Stats may be called from any goroutine at any time. Run returns
// after every goroutine it started has ended.
package traffic
