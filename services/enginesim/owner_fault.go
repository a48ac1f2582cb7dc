package enginesim

import (
	"fmt"
	"time"
)

// inject applies a fault request on the owner goroutine.
func (o *owner) inject(r faultReq) error {
	if err := r.f.validate(int(o.e.total.Load())); err != nil {
		return fmt.Errorf("enginesim: engine %s: %w", o.e.name, err)
	}
	now := time.Now()
	if r.reset {
		o.reverts = o.reverts[:0]
		if err := o.applyState(now, o.noFault()); err != nil {
			return err
		}
	}
	next, undo := o.state.apply(r.f)
	if err := o.applyState(now, next); err != nil {
		return err
	}
	if r.f.Duration > 0 {
		o.reverts = append(o.reverts, revert{at: now.Add(r.f.Duration), undo: undo})
	}
	o.publish()
	return nil
}

// noFault is the engine's state without faults.
func (o *owner) noFault() faultState {
	return faultState{slowdown: 1, healthy: true, ready: int(o.e.total.Load())}
}

// revertDue undoes, oldest deadline first, the faults whose duration has
// passed.
func (o *owner) revertDue(now time.Time) {
	for {
		i := -1
		for j, r := range o.reverts {
			if !r.at.After(now) && (i < 0 || r.at.Before(o.reverts[i].at)) {
				i = j
			}
		}
		if i < 0 {
			return
		}
		undo := o.reverts[i].undo
		o.reverts = append(o.reverts[:i], o.reverts[i+1:]...)
		next, _ := o.state.apply(undo)
		if err := o.applyState(now, next); err != nil {
			// The undo restores values that were valid before.
			o.sim.log.Error("enginesim: revert fault", "engine", o.e.name, "err", err)
		}
	}
}

// applyState moves the model to next, changing only what differs.
func (o *owner) applyState(now time.Time, next faultState) error {
	v := o.sim.clock.at(now)
	cur := o.state
	if next.slowdown != cur.slowdown {
		if err := o.core.setSlowdown(v, next.slowdown); err != nil {
			return fmt.Errorf("enginesim: engine %s: %w", o.e.name, err)
		}
	}
	if next.errorRate != cur.errorRate {
		o.seeds++
		if err := o.core.model.SetErrorRate(next.errorRate, o.e.seed+o.seeds*0x9e3779b97f4a7c15); err != nil {
			return fmt.Errorf("enginesim: engine %s: %w", o.e.name, err)
		}
	}
	if next.healthy != cur.healthy {
		o.core.setHealthy(next.healthy)
	}
	if next.ready != cur.ready {
		if err := o.core.setReplicas(v, next.ready, int(o.e.total.Load())); err != nil {
			return fmt.Errorf("enginesim: engine %s: %w", o.e.name, err)
		}
	}
	o.state = next
	return nil
}
