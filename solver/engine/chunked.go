package engine

// Chunked prefill, as vLLM V1 schedules it. Every step has a budget of
// MaxNumBatchedTokens per ready replica. Each decoding request takes one
// token of it; the requests in prefill then take prompt chunks of what is
// left, in arrival order (a prompt longer than the rest continues in the
// next step); and while budget remains, waiting requests are admitted in
// order and take chunks too. A step with no prompt chunk is a decode
// step, and while no request is in prefill the batch is constant up to the
// next finish, so those steps are taken as one run, as in whole mode.
//
// A step with P prompt tokens and D decoding requests lasts
//
//	DecodeBaseMs + DecodePerSeqMs·D + P/PrefillTokensPerS (+ PrefillOverheadMs if P > 0)
//
// times the slowdown: the decode step's fixed cost (weights read once per
// step, launch and sampling overhead) plus each decoding request's cost,
// plus the prompt tokens at the prefill rate. With P = 0 it is the
// calibrated decode step. With D = 0 and a full 8192-token chunk it is
// 28.9 + 882.5 = 911 ms on h100, where SplitwiseSim measured 912.7 ms for
// 8192 prompt tokens: the through-origin prefill fit leaves out the fixed
// cost a whole-prompt iteration also pays, and the base puts it back.

// startChunked chooses the step starting at t.
func (e *Engine) startChunked(t int64, out []Done) []Done {
	budget := e.budget - len(e.running)
	var tokens int64
	n := 0
	for n < len(e.prefill) && budget > 0 {
		budget, tokens = e.schedule(e.prefill[n], budget, tokens)
		n++
	}
	for budget > 0 && e.waiting.len() > 0 && e.canAdmit(e.waiting.peek()) {
		var i int32
		var ok bool
		if i, ok, out = e.admitHead(t, out); ok {
			r := &e.recs[i]
			r.left = r.prompt - r.cached
			e.kv.prefill += int64(r.cached)
			budget, tokens = e.schedule(i, budget, tokens)
			n++
		}
	}
	e.chunkN = n
	switch {
	case n > 0:
		e.kind = iterChunk
		e.stepNs = e.chunkStepNs(tokens, len(e.running))
		e.runSteps = 1
		e.iterEnd = endAfter(t, 1, e.stepNs)
	case len(e.running) > 0 && len(e.prefill) > 0:
		// Prompts wait for budget the decodes hold (only after replicas
		// were lost): one decode step at a time.
		e.startDecodeRun(t)
		e.runSteps = 1
		e.iterEnd = endAfter(t, 1, e.stepNs)
	case len(e.running) > 0:
		e.startDecodeRun(t)
	default:
		e.kind, e.busy = iterNone, false
	}
	return out
}

// schedule gives record i a chunk of the budget and returns what is left
// of it and the step's prompt tokens so far. A record's KV grows by its
// chunk when the chunk is scheduled, as vLLM allocates it.
func (e *Engine) schedule(i int32, budget int, tokens int64) (int, int64) {
	r := &e.recs[i]
	r.sched = min(r.left, budget)
	e.kv.prefill += int64(r.sched)
	return budget - r.sched, tokens + int64(r.sched)
}

// endChunk ends a chunked step: every decoding request has one more token
// (those at their last finish), and the requests whose prompt is done
// have their first token.
func (e *Engine) endChunk(out []Done) []Done {
	t := e.iterEnd
	e.step++
	e.stats.Prefills++
	e.stats.PrefillNs += t - e.iterStart
	for len(e.running) > 0 && e.running[0].finish <= e.step {
		out = e.finish(e.running.pop().rec, t, out)
	}
	done := 0
	for _, i := range e.prefill[:e.chunkN] {
		r := &e.recs[i]
		r.left -= r.sched
		if r.left == 0 {
			out = e.prefilled(i, t, out)
			done++
		}
	}
	// Only the last record scheduled can be part-way through its prompt.
	e.prefill = e.prefill[:copy(e.prefill, e.prefill[done:])]
	e.chunkN = 0
	return out
}

// chunkStepNs is the duration of a step with tokens prompt tokens and b
// decoding requests; at least 1 ns so that time always moves.
func (e *Engine) chunkStepNs(tokens int64, b int) int64 {
	ns := e.baseNs + e.perSeqNs*float64(b) + float64(tokens)*e.nsPerToken
	if tokens > 0 {
		ns += e.overheadNs
	}
	return max(roundNs(ns*e.slowdown), 1)
}
