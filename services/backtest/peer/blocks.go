package peer

// A router hashes the prompt in blocks of its own size (16-64 tokens, or
// 128 characters), while a trace gives one hash per Fleet.BlockTokens
// tokens (512 in the Mooncake traces). Two prompts share a router block
// exactly when they share the trace block containing it (block hashes
// are prefix-chained: equal ids mean equal prompts up to the block's
// end), so a router's view of a prefix follows from the trace's: k
// leading trace blocks in common are the router blocks that fit in
// k·BlockTokens tokens. What the mapping cannot see is a match that ends
// inside a trace block (a turn's last, partial block, extended by the
// next turn): the engine model misses it as well, so the router and the
// engine agree on what is cached.

// ceilDiv is ⌈a/b⌉ for a >= 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// routerBlocks is how many blocks of b tokens a router hashes over the
// first tokens of a prompt: a trailing partial block counts when the
// router hashes it (tail).
func routerBlocks(tokens, b int, tail bool) int {
	if tail {
		return ceilDiv(tokens, b)
	}
	return tokens / b
}

// blockSpan maps one request's trace blocks onto a router's blocks.
type blockSpan struct {
	traceTokens int // Fleet.BlockTokens
	prompt      int // the request's prompt tokens
	b           int // the router's block size in tokens
	tail        bool
	total       int // router blocks of the request, after the router's cap
}

// newBlockSpan describes a prompt of prompt tokens for a router hashing
// blocks of b tokens, at most maxBlocks of them (0: no cap).
func newBlockSpan(traceTokens, prompt, b int, tail bool, maxBlocks int) blockSpan {
	s := blockSpan{traceTokens: traceTokens, prompt: prompt, b: b, tail: tail}
	s.total = routerBlocks(prompt, b, tail)
	if maxBlocks > 0 {
		s.total = min(s.total, maxBlocks)
	}
	return s
}

// upTo is how many of the router's blocks lie within the first k trace
// blocks.
func (s blockSpan) upTo(k int) int {
	return min(routerBlocks(min(k*s.traceTokens, s.prompt), s.b, s.tail), s.total)
}

// traceBlocks is how many trace blocks the router's blocks reach into
// (the ones whose hashes it keeps), at most n, the request's trace blocks.
func (s blockSpan) traceBlocks(n int) int {
	return min(ceilDiv(min(s.total*s.b, s.prompt), s.traceTokens), n)
}
