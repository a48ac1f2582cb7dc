package enginesim

import (
	"fmt"

	"github.com/ilb-router/ilb/solver/engine"
)

// core drives one engine.Engine in virtual time and reports, besides the
// completions the model returns, when each request got its first token,
// which a streaming client must see when it happens. The model records
// first tokens (engine.EnableFirstTokens); the core takes them after each
// model event. TestCoreFirstTokenMatchesModel checks the reported times
// against the model's own FirstTokenNs.
//
// A core is owned by one goroutine.
type core struct {
	model  *engine.Engine
	firsts []engine.FirstToken
	dones  []engine.Done

	// onFirst and onDone are called, in that order for a request, from
	// advanceTo.
	onFirst func(tag uint64, atNs int64)
	onDone  func(d *engine.Done)
}

func newCore(p engine.Params, onFirst func(uint64, int64), onDone func(*engine.Done)) (*core, error) {
	m, err := engine.New(p)
	if err != nil {
		return nil, err
	}
	m.EnableFirstTokens(true)
	return &core{model: m, onFirst: onFirst, onDone: onDone}, nil
}

// submit offers r to the model at virtual time v. Boundaries before v are
// processed first, one event time at a time.
func (c *core) submit(v int64, r engine.Request) error {
	c.advanceTo(v - 1)
	if err := c.model.Submit(v, r); err != nil {
		return fmt.Errorf("enginesim: submit: %w", err)
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
		c.firsts = c.model.TakeFirstTokens(c.firsts[:0])
		for _, f := range c.firsts {
			c.onFirst(f.Tag, f.AtNs)
		}
		for i := range c.dones {
			c.onDone(&c.dones[i])
		}
	}
}

// setHealthy changes the model's health; an unhealthy model rejects new
// requests at once, so they never queue.
func (c *core) setHealthy(h bool) {
	c.model.SetHealthy(h)
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
