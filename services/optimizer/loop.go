package optimizer

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
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
// triggers, and runs a cycle whenever the clock says one is due.
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
		var next time.Time
		if o.cfg.Clock == ClockEvent {
			next = o.stepEvent(ctx)
		} else {
			next = o.stepWall(ctx)
		}
		timer.Reset(max(0, next.Sub(o.now())))
	}
}

// stepWall solves when the schedule says so and returns when to look
// again.
func (o *Optimizer) stepWall(ctx context.Context) time.Time {
	if now := o.now(); !now.Before(o.sched.due()) {
		refresh := !o.sched.dirty()
		o.sched.solved(now)
		o.cycle(ctx, refresh)
	}
	return o.sched.due()
}

// stepEvent solves every complete window in order, then a trigger's
// solve if one is due (the first solve, a new leader, a lost publish),
// and returns when to look again. There is no solve without new windows
// or triggers: when the signals stop, so do publishes, and the data
// planes see their snapshots age.
func (o *Optimizer) stepEvent(ctx context.Context) time.Time {
	for {
		end, ok := o.ticks.ready(o.now())
		if !ok {
			break
		}
		rows, profs := o.ticks.take(end)
		o.in.addFeatures(rows)
		o.in.addProfiles(profs)
		o.countRejected()
		o.sched.solved(o.now())
		o.cycle(ctx, false)
	}
	if o.sched.dirty() && !o.now().Before(o.sched.due()) {
		o.sched.solved(o.now())
		o.cycle(ctx, false)
	}
	next := o.ticks.deadline()
	if o.sched.dirty() && (next.IsZero() || o.sched.due().Before(next)) {
		next = o.sched.due()
	}
	if next.IsZero() {
		next = o.now().Add(o.cfg.MaxInterval) // nothing to wait for; wake up anyway
	}
	return next
}

// apply folds one decoded record into the inputs (wall clock) or queues
// it for its window (event clock); new data marks the schedule dirty and
// remembers the record's trace for the solve's span.
func (o *Optimizer) apply(in input) {
	if in.fleet != nil {
		o.setFleet(in.fleet)
		return
	}
	changed := false
	if o.cfg.Clock == ClockEvent {
		o.ticks.announced = max(o.ticks.announced, in.profAsOf)
		if late := o.ticks.addFeatures(o.admit(in.features), in.src, o.now()); len(late) > 0 {
			o.in.addFeatures(late)
			o.met.lateRows.Add(context.Background(), int64(len(late)))
		}
		o.ticks.addProfiles(in.asOf, in.profiles)
	} else {
		if len(in.features) > 0 {
			changed = o.in.addFeatures(in.features)
		}
		if len(in.profiles) > 0 {
			changed = o.in.addProfiles(in.profiles) || changed
		}
	}
	o.countRejected()
	if changed {
		o.sched.markDirty(o.now())
	}
	if !in.span.IsValid() || (!changed && o.cfg.Clock != ClockEvent) {
		return
	}
	if o.parent.IsValid() && len(o.links) < maxLinks {
		o.links = append(o.links, trace.Link{SpanContext: o.parent})
	}
	o.parent = in.span
}

// admit drops (and counts) the rows the inputs would refuse, and rows
// that claim windows ending more than maxFuture ahead of the wall clock:
// one such row would otherwise hold the event clock hostage.
func (o *Optimizer) admit(rows []schemas.Feature) []schemas.Feature {
	out := rows[:0:0]
	limit := o.now().Add(maxFuture).UnixNano()
	for _, r := range rows {
		switch {
		case r.Validate() != nil:
			o.in.rejected[rejectInvalid]++
		case !o.in.known(r.Engine, r.Cluster):
			o.in.rejected[rejectUnknown]++
		case r.WindowEndUnixNano > limit:
			o.in.rejected[rejectFuture]++
		default:
			out = append(out, r)
		}
	}
	return out
}

// maxFuture is how far ahead of the optimizer's clock a window may end.
const maxFuture = 10 * time.Minute

func (o *Optimizer) countRejected() {
	for reason, n := range o.in.rejected {
		o.met.inputsRejected(context.Background(), reason, n)
		delete(o.in.rejected, reason)
	}
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
