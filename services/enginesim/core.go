package enginesim

import (
	"fmt"

	"github.com/ilb-router/ilb/solver/engine"
)

// core drives one engine.Engine in virtual time and reports, besides the
// completions the model returns, when each request got its first token,
// which the model does not report until the request finishes but a
// streaming client must see when it happens.
//
// The first-token times are read off the model's counters, exactly: the
// model admits waiting requests in arrival order (failed ones leave the
// queue with an error completion), Stats.OutputTokens grows by each
// admitted request's output tokens (at least 1), and Stats.Prefills grows
// when a prefill iteration ends, giving every request in it its first
// token. So the core keeps the not yet admitted requests in arrival order
// and the ones being prefilled, advances the model one event time at a
// time, and after each step matches the counters' growth against its
// queue. That is exact while every prefill takes time, so that at most
// one prefill ends and one group is admitted per event time; appendBlocks
// makes sure of it by leaving a prompt's last token out of its blocks (as
// vLLM recomputes it), so a prefill computes at least one token. Were a
// prefill to last zero nanoseconds anyway (absurd parameters), its
// requests are reported at that step's time, which is right unless a
// second prefill started at the same instant.
// TestCoreFirstTokenMatchesModel checks the reported times against the
// model's own FirstTokenNs.
//
// A core is owned by one goroutine.
type core struct {
	model *engine.Engine
	// queued are the requests submitted and not yet admitted, in order;
	// qhead indexes the first.
	queued []queuedJob
	qhead  int
	// prefill are the tags of admitted requests waiting for their first
	// token.
	prefill, admitted []uint64
	last              engine.Stats
	dones             []engine.Done
	healthy           bool // mirrors the model's health: rejected requests never queue

	// onFirst and onDone are called, in that order for a request, from
	// advanceTo.
	onFirst func(tag uint64, atNs int64)
	onDone  func(d *engine.Done)
}

type queuedJob struct {
	tag    uint64
	output int
}

func newCore(p engine.Params, onFirst func(uint64, int64), onDone func(*engine.Done)) (*core, error) {
	m, err := engine.New(p)
	if err != nil {
		return nil, err
	}
	return &core{model: m, healthy: true, onFirst: onFirst, onDone: onDone}, nil
}

// submit offers r to the model at virtual time v. Boundaries before v are
// processed first, one event time at a time, so the counters stay
// readable.
func (c *core) submit(v int64, r engine.Request) error {
	c.advanceTo(v - 1)
	if err := c.model.Submit(v, r); err != nil {
		return fmt.Errorf("enginesim: submit: %w", err)
	}
	if c.healthy {
		c.queued = append(c.queued, queuedJob{tag: r.Tag, output: r.OutputTokens})
	}
	return nil
}

// advanceTo processes every model event at or before v.
func (c *core) advanceTo(v int64) {
	for {
		t, ok := c.model.NextEventTime()
		if !ok || t > v {
			return
		}
		c.dones = c.model.Advance(t, c.dones[:0])
		c.step(t, c.model.Stats())
	}
}

// step matches one event time's counter growth against the queue.
func (c *core) step(t int64, st engine.Stats) {
	for i := range c.dones {
		if c.dones[i].Error == engine.ErrorInjected {
			c.dropQueued(c.dones[i].Tag)
		}
	}
	c.admit(st.OutputTokens - c.last.OutputTokens)
	ended := st.Prefills - c.last.Prefills
	if ended > 0 && len(c.prefill) > 0 {
		c.first(c.prefill, t)
		c.prefill = c.prefill[:0]
		ended--
	}
	if ended > 0 {
		// A prefill began and ended within this step (zero duration).
		c.first(c.admitted, t)
	} else {
		c.prefill = append(c.prefill, c.admitted...)
	}
	c.last = st
	for i := range c.dones {
		c.onDone(&c.dones[i])
	}
}

// admit moves from the queue the requests whose output tokens account for
// the growth of Stats.OutputTokens.
func (c *core) admit(grown int64) {
	c.admitted = c.admitted[:0]
	for grown > 0 && c.qhead < len(c.queued) {
		j := c.queued[c.qhead]
		c.qhead++
		grown -= int64(j.output)
		c.admitted = append(c.admitted, j.tag)
	}
	if c.qhead > 64 && 2*c.qhead > len(c.queued) {
		n := copy(c.queued, c.queued[c.qhead:])
		c.queued, c.qhead = c.queued[:n], 0
	}
}

// dropQueued removes a request that failed at admission; it is at or
// near the head of the queue.
func (c *core) dropQueued(tag uint64) {
	for i := c.qhead; i < len(c.queued); i++ {
		if c.queued[i].tag == tag {
			c.queued = append(c.queued[:i], c.queued[i+1:]...)
			return
		}
	}
}

func (c *core) first(tags []uint64, t int64) {
	for _, tag := range tags {
		c.onFirst(tag, t)
	}
}

// setHealthy changes the model's health; an unhealthy model rejects new
// requests at once, so they never queue.
func (c *core) setHealthy(h bool) {
	c.model.SetHealthy(h)
	c.healthy = h
}

// setSlowdown and setReplicas process the boundaries before v first, as
// submit does.
func (c *core) setSlowdown(v int64, f float64) error {
	c.advanceTo(v - 1)
	return c.model.SetSlowdown(v, f)
}

func (c *core) setReplicas(v int64, ready, total int) error {
	c.advanceTo(v - 1)
	return c.model.SetReplicas(v, ready, total)
}
