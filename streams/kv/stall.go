package kv

import (
	"context"
	"strings"
	"time"
)

// stallCheck is the ticker of a watcher's stall check; c is nil (never
// fires) when the check is off.
type stallCheck struct {
	t *time.Ticker
	c <-chan time.Time
}

func (s stallCheck) stop() {
	if s.t != nil {
		s.t.Stop()
	}
}

// newStallCheck starts the check for one watcher: only for a single key
// (a pattern cannot be read with one Get), and only when turned on.
func (w *watcher) newStallCheck() stallCheck {
	w.pending = 0
	if w.o.stallCheck <= 0 || strings.ContainsAny(w.keys, "*>") {
		return stallCheck{}
	}
	t := time.NewTicker(w.o.stallCheck)
	return stallCheck{t: t, c: t.C}
}

// stalled reads the key's latest revision. It reports a stall when a
// revision the watcher had not delivered at the previous check is still
// not delivered: an update takes milliseconds to arrive, so one whole
// period means the watcher's consumer is gone. A failed read (the
// connection is down, the stream has no leader) says nothing.
func (w *watcher) stalled(ctx context.Context) bool {
	if w.pending > 0 && w.delivered[w.keys] < w.pending {
		return true
	}
	w.pending = 0
	gctx, cancel := context.WithTimeout(ctx, min(w.o.stallCheck, 2*time.Second))
	defer cancel()
	e, err := w.kv.Get(gctx, w.keys)
	if err != nil {
		return false // not found, deleted (not delivered by default), or unreachable
	}
	if e.Revision() > w.delivered[w.keys] {
		w.pending = e.Revision()
	}
	return false
}
