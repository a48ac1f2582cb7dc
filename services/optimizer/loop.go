package optimizer

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// schedule decides when the next solve is due: SettleDelay after the
// first trigger since the last solve, but no sooner than MinInterval after
// it; without triggers, MaxInterval after it. Pure: times are passed in.
type schedule struct {
	minGap, maxGap, settle time.Duration
	lastSolve              time.Time // zero: never solved
	dirtySince             time.Time // zero: nothing new since the last solve
}

// markDirty records a trigger at t; later triggers before the solve
// coalesce into it.
func (s *schedule) markDirty(t time.Time) {
	if s.dirtySince.IsZero() {
		s.dirtySince = t
	}
}

func (s *schedule) dirty() bool { return !s.dirtySince.IsZero() }

// due returns when the next solve should start.
func (s *schedule) due() time.Time {
	if !s.dirty() {
		return s.lastSolve.Add(s.maxGap)
	}
	d := s.dirtySince.Add(s.settle)
	if !s.lastSolve.IsZero() {
		if m := s.lastSolve.Add(s.minGap); m.After(d) {
			d = m
		}
	}
	return d
}

// solved records a solve starting at t.
func (s *schedule) solved(t time.Time) {
	s.lastSolve, s.dirtySince = t, time.Time{}
}

// loop owns the solve state: it applies decoded input, coalesces
// triggers, and runs a cycle whenever the schedule says one is due.
func (o *Optimizer) loop(ctx context.Context) error {
	o.sched = schedule{minGap: o.cfg.MinInterval, maxGap: o.cfg.MaxInterval, settle: o.cfg.SettleDelay}
	o.sched.markDirty(o.now()) // first solve: as soon as the backlog has had a moment
	timer := time.NewTimer(o.cfg.SettleDelay)
	defer timer.Stop()
	o.health.Set("optimizer", true)
	defer o.health.Set("optimizer", false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case in := <-o.inbox:
			o.apply(in)
		case <-o.trigger:
			o.sched.markDirty(o.now())
		case <-timer.C:
		}
		now := o.now()
		if !now.Before(o.sched.due()) {
			refresh := !o.sched.dirty()
			o.sched.solved(now)
			o.cycle(ctx, refresh)
			now = o.now()
		}
		timer.Reset(max(0, o.sched.due().Sub(now)))
	}
}

// apply folds one decoded record into the inputs; new data marks the
// schedule dirty and remembers the record's trace for the solve's span.
func (o *Optimizer) apply(in input) {
	changed := false
	if len(in.features) > 0 {
		changed = o.in.addFeatures(in.features)
	}
	if len(in.profiles) > 0 {
		changed = o.in.addProfiles(in.profiles) || changed
	}
	for reason, n := range o.in.rejected {
		o.met.inputsRejected(context.Background(), reason, n)
		delete(o.in.rejected, reason)
	}
	if !changed {
		return
	}
	o.sched.markDirty(o.now())
	if !in.span.IsValid() {
		return
	}
	if o.parent.IsValid() && len(o.links) < maxLinks {
		o.links = append(o.links, trace.Link{SpanContext: o.parent})
	}
	o.parent = in.span
}

// runLease keeps trying to hold the leader lease, renewing it every third
// of its duration, and releases it on the way out.
func (o *Optimizer) runLease(ctx context.Context) error {
	l := newLease(o.pub, o.cfg.ID, o.cfg.LeaseDuration, o.now)
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := l.release(rctx); err != nil {
			o.log.Warn("optimizer: releasing the lease", "err", err)
		}
		o.leaderUntil.Store(0)
		o.met.leader.Record(rctx, 0)
	}()
	t := time.NewTicker(o.cfg.LeaseDuration / 3)
	defer t.Stop()
	was := false
	for {
		held, err := l.step(ctx)
		if err != nil && ctx.Err() == nil {
			o.log.Warn("optimizer: lease", "err", err)
		}
		o.leaderUntil.Store(unixNano(l.heldUntil))
		if held != was {
			o.log.Info("optimizer: leadership changed", "id", o.cfg.ID, "leader", held)
			o.met.leader.Record(ctx, boolInt(held))
			if held {
				o.Trigger()
			}
			was = held
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
