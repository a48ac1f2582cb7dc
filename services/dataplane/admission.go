package dataplane

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
)

// ErrAdmission: local admission refused the request, every engine it may
// use having more requests waiting than it can start within the TTFT SLO
// (429, counted apart from the snapshot's shed).
var ErrAdmission = errors.New("admission: every engine's queue or pending prefill is over what it can start within the SLO")

// live is an engine's queue as this process sees it, read on the request
// path without a lock: the waiting and running counts of its last status,
// the requests this process sent it since, and whether that status is
// fresh (within the status TTL, checked every tick). Without a fresh
// status the queue is unknown and local admission lets everything in.
type live struct {
	waiting, running atomic.Int64
	sent             atomic.Int64
	ended            atomic.Int64  // of those sent since the last status, the ones that ended
	gen              atomic.Uint64 // statuses taken so far: what sent and ended count from
	fresh            atomic.Bool
	own              atomic.Int64 // this process's requests at the engine: sent and not ended
	ownAtStatus      atomic.Int64 // own when the last status came
	pending          atomic.Int64 // prompt tokens this process sent and has no answer to yet (prefill)
	remote           atomic.Int64 // the same of the other data planes, as they last published it (pending_sync.go)
}

// observeStatusLocked takes a new status: the queue is known anew.
func (l *live) observeStatusLocked(st *schemas.EngineStatus) {
	l.waiting.Store(int64(st.Waiting))
	l.running.Store(int64(st.Running))
	l.ownAtStatus.Store(l.own.Load())
	l.sent.Store(0)
	l.ended.Store(0)
	l.gen.Add(1)
	l.fresh.Store(true)
}

// refreshLocked marks the status stale once it is older than ttl.
func (l *live) refreshLocked(statusAt, now time.Time, ttl time.Duration) {
	l.fresh.Store(!statusAt.IsZero() && (ttl <= 0 || now.Sub(statusAt) <= ttl))
}

// queue is the estimated number of requests waiting at the engine, for
// local admission: waiting by its last status plus those sent since that
// have not ended (an ended request waits nowhere; counting it refused a
// quick second request to a one-engine model until the next status); ok
// is false when no fresh status says.
func (l *live) queue() (float64, bool) {
	if !l.fresh.Load() {
		return 0, false
	}
	return float64(l.waiting.Load() + l.sent.Load() - l.ended.Load()), true
}

// busy is the requests at the engine for the load the candidates are
// compared on (routing.Busy): the other data planes' by the last status,
// and this process's own in flight now; ok as for queue.
func (l *live) busy() (float64, bool) {
	if !l.fresh.Load() {
		return 0, false
	}
	return routing.Busy(float64(l.waiting.Load()), float64(l.running.Load()), float64(l.ownAtStatus.Load()), float64(l.own.Load())), true
}

// held is the number of requests at the engine as this process knows
// them: waiting and running by its last status, and sent since and not
// ended (routing.Move).
func (l *live) held() float64 {
	return float64(l.waiting.Load() + l.running.Load() + l.sent.Load() - l.ended.Load())
}

// pendingTokens is the prompt tokens pending prefill at the engine: this
// process's, and with shared the other data planes' as they last
// published them.
func (l *live) pendingTokens(shared bool) int64 {
	tok := l.pending.Load()
	if shared {
		tok += l.remote.Load()
	}
	return tok
}

// end counts the end of a request this process sent at status
// generation gen, when no status has come since.
func (l *live) end(gen uint64) {
	if l.gen.Load() == gen {
		l.ended.Add(1)
	}
}

// admits reports whether the engine of slot s takes a request under local
// admission: routing.Admit with the snapshot's queue limit on its queue
// (when a fresh status says what it is), and with its prefill limit on
// the prompt tokens pending there, this process's and the other data
// planes' as they last shared them (routing.PrefillLimit).
func (s *slot) admits(ongoing bool) bool {
	if q, ok := s.eng.live.queue(); ok && !routing.Admit(q, s.limit, ongoing) {
		return false
	}
	return routing.Admit(float64(s.eng.live.pendingTokens(true)), s.prefill, ongoing)
}

// load is slot s's load for the choice among candidates (routing.
// SecondChoice): its queue and batch (live.busy: the other data planes'
// requests by its last status, this process's own as they are now), plus
// the prefill pending there in requests of meanPrompt tokens, over its
// queue limit (proportional to capacity); +Inf when unknown, so that an
// engine with a known load is preferred. The pending prefill is this
// process's, and with shared also the other data planes' (live.remote):
// the picker shares it while its cluster sheds nothing (README.md,
// "Pending prefill"). The backtester's tablePicker.load is the same.
func (s *slot) load(meanPrompt float64, shared bool) float64 {
	q, ok := s.eng.live.busy()
	if !ok || !(s.limit > 0) {
		return math.Inf(1)
	}
	if meanPrompt > 0 {
		q += float64(s.eng.live.pendingTokens(shared)) / meanPrompt
	}
	return q / s.limit
}

// prefill is one attempt's prompt, counted at its engine (live.pending)
// from when it is sent until the engine's answer starts (a streamed
// answer's first token) or the attempt ends: the prefill this data plane
// knows is queued there, exactly and at once, where statuses come a
// second late. Its size is estimated as a quarter of the body's bytes
// (about four bytes a token), no tokenizer on the request path.
type prefill struct {
	eng    *engine
	tokens int64
	at     *engine // the attempt's engine until it ends (end)
	gen    uint64  // its status generation when sent
}

func (p *prefill) start(c *cluster, e *engine, bodyBytes int64) {
	p.eng, p.tokens = e, int64(EstimatePromptTokens(bodyBytes))
	p.at, p.gen = e, e.live.gen.Load()
	e.live.pending.Add(p.tokens)
	c.observePrompt(p.tokens)
}

// done takes the prompt off its engine; later calls do nothing.
func (p *prefill) done() {
	if p.eng != nil {
		p.eng.live.pending.Add(-p.tokens)
		p.eng = nil
	}
}

// end is the attempt's end: its prompt is no longer pending, and it is
// counted as ended at its engine (live.end).
func (p *prefill) end() {
	p.done()
	if p.at != nil {
		p.at.live.end(p.gen)
		p.at = nil
	}
}
