package engine

import "math"

// run processes every iteration boundary at or before to. At a boundary
// the iteration that ends there completes, then the next one is chosen:
// a prefill when waiting requests can be admitted, else a run of decode
// steps, else the engine goes idle.
func (e *Engine) run(to int64, out []Done) []Done {
	for e.busy && e.iterEnd <= to {
		switch e.kind {
		case iterPrefill:
			out = e.endPrefill(out)
		case iterDecode:
			out = e.endDecode(out)
		case iterChunk:
			out = e.endChunk(out)
		}
		out = e.startIteration(out)
	}
	e.through = max(e.through, to)
	return out
}

func (e *Engine) startIteration(out []Done) []Done {
	t := e.iterEnd
	e.iterStart = t
	if e.chunked {
		return e.startChunked(t, out)
	}
	out = e.admit(t, out)
	switch {
	case len(e.prefill) > 0:
		e.kind = iterPrefill
		e.iterEnd = endAfter(t, 1, e.prefillNs(e.uncached))
	case len(e.running) > 0:
		// The batch stays the same until the next request finishes or an
		// arrival can be admitted (then Submit cuts the run short), so
		// all the steps up to the next finish are taken in one go.
		e.startDecodeRun(t)
	default:
		e.kind, e.busy = iterNone, false
	}
	return out
}

// startDecodeRun starts the decode steps up to the next finish, at t.
func (e *Engine) startDecodeRun(t int64) {
	e.kind = iterDecode
	e.stepNs = e.decodeStepNs(len(e.running))
	e.runSteps = e.running[0].finish - e.step
	e.iterEnd = endAfter(t, e.runSteps, e.stepNs)
}

// admit moves waiting requests into the prefill batch, in arrival order,
// while there is room; a request drawn to fail is answered at once and
// takes no room.
func (e *Engine) admit(t int64, out []Done) []Done {
	e.uncached = 0
	for e.waiting.len() > 0 && e.canAdmit(e.waiting.peek()) {
		var i int32
		var ok bool
		if i, ok, out = e.admitHead(t, out); ok {
			r := &e.recs[i]
			e.uncached += int64(r.prompt - r.cached)
			e.kv.prefill += int64(r.prompt)
		}
	}
	return out
}

// admitHead takes the head of the queue at t: it fails it when the error
// rate draws so (ok false), else looks up its cached prefix, reserves its
// KV and appends it to the prefill list.
func (e *Engine) admitHead(t int64, out []Done) (int32, bool, []Done) {
	i := e.waiting.pop()
	if e.errRate > 0 && e.rng.float64() < e.errRate {
		out = append(out, e.failed(i, t, ErrorInjected))
		e.stats.Injected++
		e.release(i)
		return i, false, out
	}
	r := &e.recs[i]
	r.cached = min(e.cache.prefixHits(r.blocks)*e.params.BlockTokens, r.prompt)
	e.kvReserved += r.reserved
	e.prefill = append(e.prefill, i)
	e.stats.PromptTokens += int64(r.prompt)
	e.stats.CachedTokens += int64(r.cached)
	e.stats.OutputTokens += int64(r.output)
	return i, true, out
}

// canAdmit reports whether record i fits in the batch now.
func (e *Engine) canAdmit(i int32) bool {
	n := len(e.prefill) + len(e.running)
	if n >= e.maxBatch {
		return false
	}
	return !e.params.KVAdmission || n == 0 || e.kvReserved+e.recs[i].reserved <= e.kvLimit
}

// endPrefill gives every prefilled request its first token, caches its
// blocks, and moves it to the decode batch (or finishes it).
func (e *Engine) endPrefill(out []Done) []Done {
	t := e.iterEnd
	e.stats.Prefills++
	e.stats.PrefillNs += t - e.iterStart
	for _, i := range e.prefill {
		out = e.prefilled(i, t, out)
	}
	e.prefill = e.prefill[:0]
	return out
}

// prefilled gives record i, whose prefill ended at t, its first token,
// caches its blocks, and moves it to the decode batch (or finishes it).
func (e *Engine) prefilled(i int32, t int64, out []Done) []Done {
	r := &e.recs[i]
	r.first = t
	e.recordFirst(i, t)
	e.cache.touchAll(r.blocks)
	if r.output == 1 {
		e.kv.prefill -= int64(r.prompt)
		return e.finish(i, t, out)
	}
	e.startDecode(i)
	e.running.push(runItem{finish: e.step + int64(r.output-1), seq: e.seq, rec: i})
	e.seq++
	return out
}

// endDecode completes a run of decode steps and finishes the requests
// that produced their last token in its last step.
func (e *Engine) endDecode(out []Done) []Done {
	t := e.iterEnd
	e.step += e.runSteps
	e.stats.DecodeSteps += e.runSteps
	e.stats.DecodeNs += t - e.iterStart
	for len(e.running) > 0 && e.running[0].finish <= e.step {
		out = e.finish(e.running.pop().rec, t, out)
	}
	return out
}

func (e *Engine) finish(i int32, t int64, out []Done) []Done {
	r := &e.recs[i]
	d := Done{
		ID: r.id, Tag: r.tag, ArrivalNs: r.arrival, FirstTokenNs: r.first, FinishNs: t,
		TTFTMs:       float64(r.first-r.arrival) / 1e6,
		PromptTokens: r.prompt, CachedTokens: r.cached, OutputTokens: r.output,
	}
	if r.output > 1 {
		d.TBOTMs = float64(t-r.first) / 1e6 / float64(r.output-1)
		e.stopDecode(i)
	}
	e.kvReserved -= r.reserved
	e.stats.Served++
	e.release(i)
	return append(out, d)
}

func (e *Engine) failed(i int32, t int64, reason string) Done {
	r := &e.recs[i]
	return Done{ID: r.id, Tag: r.tag, ArrivalNs: r.arrival, FirstTokenNs: t, FinishNs: t,
		PromptTokens: r.prompt, OutputTokens: r.output, Error: reason}
}

// cutRun ends the decode run in progress at its first step boundary that
// has not been passed yet (later than any time already processed), so that
// the decision taken there sees what changed at now. In the model every
// step ends at a boundary; a run only skips those where nothing changes.
func (e *Engine) cutRun() {
	k := (e.through-e.iterStart)/e.stepNs + 1
	if k < e.runSteps {
		e.runSteps = k
		e.iterEnd = e.iterStart + k*e.stepNs
	}
}

// wake makes an idle engine take a decision at now.
func (e *Engine) wake(now int64) {
	e.busy, e.kind = true, iterNone
	e.iterStart, e.iterEnd = now, now
}

// derive recomputes the timings from the parameters and faults. Ready
// replicas are modelled as identical servers sharing the load evenly:
// they multiply the batch limit, the prefill throughput, the KV memory and
// the prefix cache, and divide the per-sequence decode cost (b requests
// over r replicas run b/r per replica). With no ready replica nothing is
// admitted, and requests already running drain at one replica's speed.
func (e *Engine) derive() {
	p, r := e.params, float64(max(e.ready, 1))
	e.maxBatch = p.MaxBatch * e.ready
	e.nsPerToken = 1e9 / (p.PrefillTokensPerS * r)
	e.overheadNs = p.PrefillOverheadMs * 1e6
	e.baseNs = p.DecodeBaseMs * 1e6
	e.perSeqNs = p.DecodePerSeqMs * 1e6 / r
	e.kvLimit = int64(p.KVCacheTokens) * int64(max(e.ready, 1))
	e.chunked = p.Scheduler == SchedulerChunked
	e.budget = p.MaxNumBatchedTokens * max(e.ready, 1)
}

func (e *Engine) cacheBlocks() int {
	return e.params.KVCacheTokens / e.params.BlockTokens * max(e.ready, 1)
}

// prefillNs is the duration of a prefill over uncached prompt tokens.
func (e *Engine) prefillNs(uncached int64) int64 {
	return roundNs((float64(uncached)*e.nsPerToken + e.overheadNs) * e.slowdown)
}

// decodeStepNs is the duration of one decode step at batch size b; at
// least 1 ns so that time always moves.
func (e *Engine) decodeStepNs(b int) int64 {
	return max(roundNs((e.baseNs+e.perSeqNs*float64(b))*e.slowdown), 1)
}

// maxDurationNs caps one duration (about 146 years) so that absurd but
// valid parameters cannot overflow the clock.
const maxDurationNs = 1 << 62

func roundNs(ns float64) int64 {
	if ns >= maxDurationNs {
		return maxDurationNs
	}
	return int64(math.Round(ns))
}

// endAfter is t + k*d, saturating at the largest time instead of wrapping.
func endAfter(t, k, d int64) int64 {
	if d > 0 && k > (math.MaxInt64-t)/d {
		return math.MaxInt64
	}
	return t + k*d
}
