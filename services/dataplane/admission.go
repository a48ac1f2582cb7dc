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
var ErrAdmission = errors.New("admission: every engine's queue is over what it can start within the SLO")

// live is an engine's queue as this process sees it, read on the request
// path without a lock: the waiting and running counts of its last status,
// the requests this process sent it since, and whether that status is
// fresh (within the status TTL, checked every tick). Without a fresh
// status the queue is unknown and local admission lets everything in.
type live struct {
	waiting, running atomic.Int64
	sent             atomic.Int64
	fresh            atomic.Bool
}

// observeStatusLocked takes a new status: the queue is known anew.
func (l *live) observeStatusLocked(st *schemas.EngineStatus) {
	l.waiting.Store(int64(st.Waiting))
	l.running.Store(int64(st.Running))
	l.sent.Store(0)
	l.fresh.Store(true)
}

// refreshLocked marks the status stale once it is older than ttl.
func (l *live) refreshLocked(statusAt, now time.Time, ttl time.Duration) {
	l.fresh.Store(!statusAt.IsZero() && (ttl <= 0 || now.Sub(statusAt) <= ttl))
}

// queue is the estimated number of requests waiting at the engine; ok is
// false when no fresh status says.
func (l *live) queue() (float64, bool) {
	if !l.fresh.Load() {
		return 0, false
	}
	return float64(l.waiting.Load() + l.sent.Load()), true
}

// admits reports whether the engine of slot s takes a request under local
// admission (routing.Admit with the snapshot's queue limit).
func (s *slot) admits(ongoing bool) bool {
	q, ok := s.eng.live.queue()
	return !ok || routing.Admit(q, s.limit, ongoing)
}

// load is slot s's load for the power of two choices: its queue and batch
// over its queue limit (proportional to capacity); +Inf when unknown, so
// that an engine with a known load is preferred.
func (s *slot) load() float64 {
	q, ok := s.eng.live.queue()
	if !ok || !(s.limit > 0) {
		return math.Inf(1)
	}
	return (q + float64(s.eng.live.running.Load())) / s.limit
}
