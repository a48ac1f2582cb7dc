package backtest

import (
	"sync"

	"github.com/ilb-router/ilb/solver/engine"
)

// enginePool keeps the engines of finished runs for the later runs of the
// same fleet (the policies of one backtest, its seeds, a benchmark's
// iterations): an engine's memory (its prefix cache's index and nodes,
// its request records) is most of what a run of a static policy
// allocates, and the collector's work with it. An engine taken from the
// pool is Reset, the state New leaves it in, with first tokens off, so a
// run sees the same engines either way. Safe for concurrent use (runs in
// parallel share it).
type enginePool struct {
	mu   sync.Mutex
	free map[engine.Params][]*engine.Engine
}

// get returns an idle engine with parameters p.
func (ep *enginePool) get(p engine.Params) (*engine.Engine, error) {
	ep.mu.Lock()
	l := ep.free[p]
	var e *engine.Engine
	if n := len(l); n > 0 {
		e, ep.free[p] = l[n-1], l[:n-1]
	}
	ep.mu.Unlock()
	if e == nil {
		return engine.New(p)
	}
	e.EnableFirstTokens(false)
	e.Reset()
	return e, nil
}

// put returns engines nothing uses any more to the pool.
func (ep *enginePool) put(es ...*engine.Engine) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.free == nil {
		ep.free = map[engine.Params][]*engine.Engine{}
	}
	for _, e := range es {
		ep.free[e.Params()] = append(ep.free[e.Params()], e)
	}
}
