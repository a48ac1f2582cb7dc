package engine

import "fmt"

// maxSlowdown bounds SetSlowdown; a slower engine is better modelled as
// unhealthy.
const maxSlowdown = 1e6

// SetSlowdown multiplies the duration of every iteration that starts at or
// after now by factor (1 is normal speed). An iteration in progress keeps
// its length: a prefill runs to its end, a run of decode steps is cut at
// the end of the step under way.
func (e *Engine) SetSlowdown(now int64, factor float64) error {
	if now < e.now {
		return fmt.Errorf("engine: set slowdown at %d ns: %w (%d ns)", now, ErrPast, e.now)
	}
	if !(factor > 0 && factor <= maxSlowdown) {
		return fmt.Errorf("%w: slowdown %v must be in (0, %v]", ErrInvalid, factor, float64(maxSlowdown))
	}
	e.catchUp(now)
	e.slowdown = factor
	e.derive()
	e.reshape(now)
	return nil
}

// SetReplicas sets how many of the engine's replicas are ready (serving)
// out of total. See derive for how replicas scale the engine. Losing
// replicas shrinks the prefix cache at once (oldest blocks go first); the
// requests already running are kept.
func (e *Engine) SetReplicas(now int64, ready, total int) error {
	if now < e.now {
		return fmt.Errorf("engine: set replicas at %d ns: %w (%d ns)", now, ErrPast, e.now)
	}
	if ready < 0 || ready > total || total > maxReplicas {
		return fmt.Errorf("%w: replicas %d ready of %d must satisfy 0 <= ready <= total <= %d", ErrInvalid, ready, total, maxReplicas)
	}
	e.catchUp(now)
	e.ready, e.total = ready, total
	e.derive()
	e.cache.setCapacity(e.cacheBlocks())
	e.reshape(now)
	return nil
}

// reshape makes the next decision happen at the first step boundary not
// yet passed, because what the engine can do has changed at now.
func (e *Engine) reshape(now int64) {
	switch {
	case e.busy && e.kind == iterDecode:
		e.cutRun()
	case !e.busy && e.waiting.len() > 0:
		e.wake(now)
	}
}

// SetHealthy marks the engine healthy or not. An unhealthy engine rejects
// each new request at once with an ErrorUnhealthy completion, but still
// serves the requests it had already accepted, queued ones included. It
// takes no time because it changes nothing already accepted.
func (e *Engine) SetHealthy(healthy bool) { e.healthy = healthy }

// SetErrorRate makes each request fail with ErrorInjected, with
// probability p, when it reaches the head of the queue and would be
// admitted. The draws come from a generator seeded with seed, in admission
// order, so the same seed and inputs fail the same requests. p = 0 turns
// injection off.
func (e *Engine) SetErrorRate(p float64, seed uint64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("%w: error rate %v must be in [0, 1]", ErrInvalid, p)
	}
	e.errRate, e.rng = p, splitmix{state: seed}
	return nil
}
