package engine

import (
	"math"
	"slices"
)

// refEngine is a deliberately naive engine for checking Engine: it takes
// one decode step at a time, touching every running request on every step,
// keeps the prefix cache as a slice searched linearly, and never skips a
// boundary. It shares nothing with Engine but the SplitMix64 generator and
// the Done and Params types.
type refEngine struct {
	p                 Params
	healthy           bool
	slowdown, errRate float64
	rng               splitmix
	ready, total      int

	now              int64
	busy             bool
	kind             iterKind
	iterStart, end   int64
	waiting, prefill []*refReq
	running          []*refReq
	kvReserved       int64
	scheduled        int      // chunked: requests in prefill with a chunk in this step
	cache            []uint64 // most recently used first
	pending          []Done
	steps            int64
	prefillNs        int64
	decodeNs         int64
	served           int64
}

type refReq struct {
	r                Request
	arrival, first   int64
	cached, produced int
	computed, chunk  int // chunked: prompt tokens scheduled before this step, and in it
}

func newRef(p Params) *refEngine {
	return &refEngine{p: p, healthy: true, slowdown: 1, ready: max(p.Replicas, 1), total: max(p.Replicas, 1)}
}

func (g *refEngine) replicas() float64 { return float64(max(g.ready, 1)) }

func (g *refEngine) cacheCap() int { return g.p.KVCacheTokens / g.p.BlockTokens * max(g.ready, 1) }

func (g *refEngine) prefillDur(tokens int64) int64 {
	ns := (float64(tokens)*(1e9/(g.p.PrefillTokensPerS*g.replicas())) + g.p.PrefillOverheadMs*1e6) * g.slowdown
	return int64(math.Round(ns))
}

func (g *refEngine) stepDur(b int) int64 {
	ns := (g.p.DecodeBaseMs*1e6 + g.p.DecodePerSeqMs*1e6/g.replicas()*float64(b)) * g.slowdown
	return max(int64(math.Round(ns)), 1)
}

func (g *refEngine) Submit(now int64, r Request) {
	g.catchUp(now)
	if !g.healthy {
		g.pending = append(g.pending, Done{ID: r.ID, Tag: r.Tag, ArrivalNs: now, FirstTokenNs: now, FinishNs: now,
			PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens, Error: ErrorUnhealthy})
		return
	}
	r.Blocks = slices.Clone(r.Blocks)
	g.waiting = append(g.waiting, &refReq{r: r, arrival: now})
	g.wakeIfIdle(now)
}

func (g *refEngine) SetSlowdown(now int64, f float64) {
	g.catchUp(now)
	g.slowdown = f
	g.wakeIfIdle(now)
}

func (g *refEngine) SetReplicas(now int64, ready, total int) {
	g.catchUp(now)
	g.ready, g.total = ready, total
	for len(g.cache) > g.cacheCap() {
		g.cache = g.cache[:len(g.cache)-1]
	}
	g.wakeIfIdle(now)
}

func (g *refEngine) wakeIfIdle(now int64) {
	if !g.busy && len(g.waiting) > 0 {
		g.busy, g.kind, g.iterStart, g.end = true, iterNone, now, now
	}
}

func (g *refEngine) catchUp(now int64) {
	g.pending = g.run(now-1, g.pending)
	g.now = now
}

func (g *refEngine) Advance(to int64, out []Done) []Done {
	out = append(out, g.pending...)
	g.pending = g.pending[:0]
	out = g.run(to, out)
	g.now = max(g.now, to)
	return out
}

func (g *refEngine) run(to int64, out []Done) []Done {
	for g.busy && g.end <= to {
		t := g.end
		switch g.kind {
		case iterPrefill:
			g.prefillNs += t - g.iterStart
			out = g.endPrefill(t, out)
		case iterDecode:
			g.decodeNs += t - g.iterStart
			out = g.endStep(t, out)
		case iterChunk:
			g.prefillNs += t - g.iterStart
			out = g.endChunkStep(t, out)
		}
		if g.p.Scheduler == SchedulerChunked {
			out = g.startChunk(t, out)
			continue
		}
		out = g.start(t, out)
	}
	return out
}

func (g *refEngine) endPrefill(t int64, out []Done) []Done {
	for _, q := range g.prefill {
		out = g.firstToken(q, t, out)
	}
	g.prefill = nil
	return out
}

func (g *refEngine) firstToken(q *refReq, t int64, out []Done) []Done {
	q.first, q.produced = t, 1
	for i := len(q.r.Blocks) - 1; i >= 0; i-- {
		g.touch(q.r.Blocks[i])
	}
	if q.r.OutputTokens == 1 {
		return append(out, g.done(q, t))
	}
	g.running = append(g.running, q)
	return out
}

func (g *refEngine) endStep(t int64, out []Done) []Done {
	g.steps++
	var still []*refReq
	for _, q := range g.running {
		q.produced++
		if q.produced == q.r.OutputTokens {
			out = append(out, g.done(q, t))
		} else {
			still = append(still, q)
		}
	}
	g.running = still
	return out
}

func (g *refEngine) done(q *refReq, t int64) Done {
	g.kvReserved -= int64(q.r.PromptTokens + q.r.OutputTokens)
	g.served++
	d := Done{ID: q.r.ID, Tag: q.r.Tag, ArrivalNs: q.arrival, FirstTokenNs: q.first, FinishNs: t,
		TTFTMs: float64(q.first-q.arrival) / 1e6, PromptTokens: q.r.PromptTokens, CachedTokens: q.cached,
		OutputTokens: q.r.OutputTokens}
	if q.r.OutputTokens > 1 {
		d.TBOTMs = float64(t-q.first) / 1e6 / float64(q.r.OutputTokens-1)
	}
	return d
}

func (g *refEngine) start(t int64, out []Done) []Done {
	g.iterStart = t
	var uncached int64
	for len(g.waiting) > 0 && g.fits(g.waiting[0]) {
		q := g.waiting[0]
		g.waiting = g.waiting[1:]
		if g.errRate > 0 && g.rng.float64() < g.errRate {
			out = append(out, Done{ID: q.r.ID, Tag: q.r.Tag, ArrivalNs: q.arrival, FirstTokenNs: t, FinishNs: t,
				PromptTokens: q.r.PromptTokens, OutputTokens: q.r.OutputTokens, Error: ErrorInjected})
			continue
		}
		q.cached = min(g.hits(q.r.Blocks)*g.p.BlockTokens, q.r.PromptTokens)
		uncached += int64(q.r.PromptTokens - q.cached)
		g.kvReserved += int64(q.r.PromptTokens + q.r.OutputTokens)
		g.prefill = append(g.prefill, q)
	}
	switch {
	case len(g.prefill) > 0:
		g.kind, g.end = iterPrefill, t+g.prefillDur(uncached)
	case len(g.running) > 0:
		g.kind, g.end = iterDecode, t+g.stepDur(len(g.running))
	default:
		g.kind, g.busy = iterNone, false
	}
	return out
}

// held is the KV tokens held by running requests: the prompt of each
// request in prefill, the prompt plus the tokens produced of each decoding
// one.
func (g *refEngine) held() int64 {
	var n int64
	for _, q := range g.prefill {
		if g.p.Scheduler == SchedulerChunked {
			n += int64(q.cached + q.computed + q.chunk)
		} else {
			n += int64(q.r.PromptTokens)
		}
	}
	for _, q := range g.running {
		n += int64(q.r.PromptTokens + q.produced)
	}
	return n
}

func (g *refEngine) fits(q *refReq) bool {
	n := len(g.prefill) + len(g.running)
	if n >= g.p.MaxBatch*g.ready {
		return false
	}
	kvLimit := int64(g.p.KVCacheTokens) * int64(max(g.ready, 1))
	return !g.p.KVAdmission || n == 0 || g.kvReserved+int64(q.r.PromptTokens+q.r.OutputTokens) <= kvLimit
}

func (g *refEngine) hits(blocks []uint64) int {
	for i, b := range blocks {
		if !slices.Contains(g.cache, b) {
			return i
		}
	}
	return len(blocks)
}

func (g *refEngine) touch(b uint64) {
	if i := slices.Index(g.cache, b); i >= 0 {
		g.cache = slices.Delete(g.cache, i, i+1)
	} else if g.cacheCap() == 0 {
		return
	}
	g.cache = slices.Insert(g.cache, 0, b)
	if len(g.cache) > g.cacheCap() {
		g.cache = g.cache[:len(g.cache)-1]
	}
}

// startChunk is chunked prefill's step choice, one step at a time: one
// token per decoding request, then prompt chunks in order, then new
// admissions while the budget lasts.
func (g *refEngine) startChunk(t int64, out []Done) []Done {
	g.iterStart = t
	budget := g.p.MaxNumBatchedTokens*max(g.ready, 1) - len(g.running)
	tokens, scheduled := 0, 0
	for _, q := range g.prefill {
		if budget <= 0 {
			break
		}
		q.chunk = min(q.r.PromptTokens-q.cached-q.computed, budget)
		budget -= q.chunk
		tokens += q.chunk
		scheduled++
	}
	for budget > 0 && len(g.waiting) > 0 && g.fits(g.waiting[0]) {
		q := g.waiting[0]
		g.waiting = g.waiting[1:]
		if g.errRate > 0 && g.rng.float64() < g.errRate {
			out = append(out, Done{ID: q.r.ID, Tag: q.r.Tag, ArrivalNs: q.arrival, FirstTokenNs: t, FinishNs: t,
				PromptTokens: q.r.PromptTokens, OutputTokens: q.r.OutputTokens, Error: ErrorInjected})
			continue
		}
		q.cached = min(g.hits(q.r.Blocks)*g.p.BlockTokens, q.r.PromptTokens)
		g.kvReserved += int64(q.r.PromptTokens + q.r.OutputTokens)
		q.chunk = min(q.r.PromptTokens-q.cached, budget)
		budget -= q.chunk
		tokens += q.chunk
		scheduled++
		g.prefill = append(g.prefill, q)
	}
	g.scheduled = scheduled
	switch {
	case scheduled > 0:
		g.kind, g.end = iterChunk, t+g.chunkDur(tokens, len(g.running))
	case len(g.running) > 0:
		g.kind, g.end = iterDecode, t+g.stepDur(len(g.running))
	default:
		g.kind, g.busy = iterNone, false
	}
	return out
}

func (g *refEngine) chunkDur(tokens, b int) int64 {
	ns := g.p.DecodeBaseMs*1e6 + g.p.DecodePerSeqMs*1e6/g.replicas()*float64(b) +
		float64(tokens)*(1e9/(g.p.PrefillTokensPerS*g.replicas()))
	if tokens > 0 {
		ns += g.p.PrefillOverheadMs * 1e6
	}
	return max(int64(math.Round(ns*g.slowdown)), 1)
}

// endChunkStep gives every decoding request a token, then the first
// token to every request whose prompt is done.
func (g *refEngine) endChunkStep(t int64, out []Done) []Done {
	out = g.endStep(t, out)
	g.steps-- // a chunked step is not a decode step
	var still []*refReq
	for k, q := range g.prefill {
		if k < g.scheduled {
			q.computed += q.chunk
			q.chunk = 0
			if q.cached+q.computed == q.r.PromptTokens {
				out = g.firstToken(q, t, out)
				continue
			}
		}
		still = append(still, q)
	}
	g.prefill = still
	return out
}
