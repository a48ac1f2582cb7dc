package engine

// kvHeld keeps the totals from which the KV memory held by running
// requests follows in O(1), without visiting them: decoding requests gain
// a token per step, and the step counter gives how many each has.
type kvHeld struct {
	prefill   int64 // tokens held by requests still in prefill
	decPrompt int64 // prompt tokens of decoding requests
	decEnter  int64 // sum of the decoding requests' enter steps
	decN      int64 // decoding requests
}

// startDecode moves record i, whose prefill ended, from the prefill total
// to the decoding ones.
func (e *Engine) startDecode(i int32) {
	r := &e.recs[i]
	r.enter = e.step
	e.kv.prefill -= int64(r.prompt)
	e.kv.decPrompt += int64(r.prompt)
	e.kv.decEnter += r.enter
	e.kv.decN++
}

// stopDecode removes a decoding record i that finished.
func (e *Engine) stopDecode(i int32) {
	r := &e.recs[i]
	e.kv.decPrompt -= int64(r.prompt)
	e.kv.decEnter -= r.enter
	e.kv.decN--
}

// kvHeldTokens is the KV memory, in tokens, held now by running requests:
// each holds its prompt (while in prefill: what has been scheduled of it)
// and one token per token generated so far. It approximates vLLM's
// kv_cache_usage_perc numerator: vLLM counts blocks of 16 tokens (the
// rounding is negligible against prompts of hundreds of tokens) and counts
// a prefix block shared by concurrent requests once, where this counts it
// for each.
//
// Within a run of decode steps it counts the steps that end at or before
// the last time processed (through), as a step-by-step engine would.
func (e *Engine) kvHeldTokens() int64 {
	s := e.step
	if e.busy && e.kind == iterDecode && e.stepNs > 0 {
		s += min(max((e.through-e.iterStart)/e.stepNs, 0), e.runSteps)
	}
	return e.kv.prefill + e.kv.decPrompt + e.kv.decN*(1+s) - e.kv.decEnter
}
