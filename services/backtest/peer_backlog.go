package backtest

// prefillBacklog is, per engine, the prompt tokens still to prefill for
// the requests sent to it that have no first token yet, less the prefix
// each found in the engine's cache when it was sent: the live state the
// reference admission policy (jsq-admission) estimates waits from. It is
// kept only for routers that read it (peer.BacklogReader).
type prefillBacklog struct {
	tokens  []int64 // by engine
	pending []int32 // by request: its tokens still counted, 0 once out
}

func newPrefillBacklog(engines, requests int) *prefillBacklog {
	return &prefillBacklog{tokens: make([]int64, engines), pending: make([]int32, requests)}
}

// sent counts request i, sent to engine e, whose prompt's blocks the
// engine holds cached up to cachedTokens.
func (b *prefillBacklog) sent(i, e, prompt, cachedTokens int) {
	u := int32(max(prompt-cachedTokens, 0))
	b.pending[i] = u
	b.tokens[e] += int64(u)
}

// out stops counting request i on engine e (first token, or finished
// or failed without one).
func (b *prefillBacklog) out(i, e int) {
	b.tokens[e] -= int64(b.pending[i])
	b.pending[i] = 0
}
