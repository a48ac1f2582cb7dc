// Package engine is ilb's model of one LLM inference engine, shared by the
// engine simulator (real time) and the backtester (virtual time) so that
// both run one code.
//
// The model is iteration-level continuous batching with one of two
// schedulers (Params.Scheduler). SchedulerChunked is vLLM V1's chunked
// prefill: each step has a budget of MaxNumBatchedTokens tokens, one for
// each decoding request first, then prompt chunks for the requests in
// prefill in arrival order (a prompt longer than the rest of the budget
// continues in the next step), then, while budget remains and the batch
// has room, waiting requests are admitted in order and take chunks too. A
// step with P prompt tokens and D decoding requests lasts DecodeBaseMs +
// DecodePerSeqMs*D + P/PrefillTokensPerS (+ PrefillOverheadMs when P > 0);
// a request has its first token at the end of its last chunk's step.
// SchedulerWhole (the zero value) is continuous batching without chunked
// prefill, described next. Requests wait in a FIFO queue. At each iteration
// boundary the engine admits waiting requests, in order, while fewer than
// MaxBatch are running (and, with KVAdmission, while their reserved KV fits);
// if it admitted any, the next iteration is a prefill of all of them, lasting
// their uncached prompt tokens / PrefillTokensPerS (plus PrefillOverheadMs),
// at whose end each has its first token. Otherwise the next iteration is a
// decode step, lasting DecodeBaseMs + DecodePerSeqMs*b at batch size b, which
// gives every running request one token. A request with OutputTokens n
// finishes after n-1 decode steps. A request's cached tokens are the longest
// prefix of its Blocks found in the engine's prefix cache, times
// BlockTokens, capped at its prompt; the cache is an LRU over
// KVCacheTokens/BlockTokens blocks, and a request's blocks are added or
// refreshed when its prefill ends.
//
// Status reports, besides queue lengths, KVUtilization as vLLM's
// kv_cache_usage_perc means it: the KV memory held by running requests
// over the engine's KV memory, computed in O(1) from running totals
// (cached prefix blocks no running request uses count as free, as in vLLM
// V1); PrefixCacheFill is the prefix cache's fill.
//
// First tokens: with EnableFirstTokens(true) the engine records when each
// served request produced its first token (the end of its prefill), and
// TakeFirstTokens hands the records over, in order of time, so that a
// router model can stop counting a request's prompt as prefill load when
// its first token comes out (as Dynamo's KV router does). Off by
// default, it then costs nothing.
//
// Faults: SetSlowdown stretches iterations, SetErrorRate fails requests at
// admission with a seeded generator, SetHealthy(false) rejects arrivals,
// SetReplicas scales capacity with the ready replicas.
//
// Time is virtual, in int64 nanoseconds, and passed in. An event loop asks
// NextEventTime when the engine next needs attention and calls Advance up to
// that time, and calls Submit at each arrival; completions come out of
// Advance. Between changes the batch is constant, so the engine jumps over
// whole runs of decode steps at once (in chunked mode, while no prompt is
// pending; steps carrying prompt chunks are taken one at a time): its
// cost is per request, not per token (see README.md for measured speed).
//
// Default parameters for h100 and a100 (DefaultParams) are fitted from
// measured llama2-70b timings, with chunked prefill and vLLM's default
// token budget for the GPU; see the constants in params.go.
//
// # Concurrency
//
// An Engine is not safe for concurrent use: one goroutine owns it. The
// package has no goroutines, no globals, no clock and no I/O; the same
// calls give bit-identical results.
package engine
