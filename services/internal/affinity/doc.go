// Package affinity derives a request's affinity key: the value whose hash
// the data plane's selection table maps to an engine, so that the turns of
// one conversation reach the engine whose KV cache holds their context.
//
// The key comes, in order of precedence, from the X-Conversation-Id
// header, the body's "user" field, or the prompt itself (Prompt): a hash
// of the model, the system messages and the first user message, which
// every later turn of a chat resends unchanged and which two
// conversations sharing only a system prompt do not share. The data
// plane's HTTP proxy and its ext_proc endpoint picker derive keys with
// ParseBody and Resolve; the backtester models the same key on traces,
// whose prompts are block hashes rather than text, with Blocks.
//
// Every function is pure and deterministic: the same request gets the
// same key in every process, so replicas agree without talking.
//
// # Concurrency
//
// The functions are safe for concurrent use; they keep no state.
package affinity
