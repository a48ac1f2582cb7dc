package enginesim

import (
	"context"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
)

// Error texts of failures the simulator decides itself (the model's own
// are engine.ErrorInjected and engine.ErrorUnhealthy).
const (
	errNoReplica = "no ready replica"
	errQueueFull = "queue full"
	errShutdown  = "shutting down"
)

// call is one HTTP request waiting on an engine.
type call struct {
	req     engine.Request
	conv    string
	cluster string
	model   string // the model it was served as (servedModel)
	span    trace.SpanContext
	stream  bool
	first   chan int64  // the virtual first-token time; buffered, streams only
	done    chan result // buffered
}

// result is a finished call: the model's Done (Error set on failure).
type result struct{ d engine.Done }

// owner is the goroutine that owns one engine's model.
type owner struct {
	sim     *Sim
	e       *simEngine
	core    *core
	params  engine.Params    // core's
	old     []*core          // cores replaced by a fleet change, finishing their requests
	calls   map[uint64]*call // every core's, by tag
	nextTag uint64
	state   faultState
	reverts []revert
	seeds   uint64 // SetErrorRate calls so far, to vary the seed
}

func newOwner(s *Sim, e *simEngine) (*owner, error) {
	o := &owner{sim: s, e: e, calls: map[uint64]*call{}}
	p := e.spec.Load().params
	c, err := newCore(p, o.onFirst, o.onDone)
	if err != nil {
		return nil, err
	}
	o.core, o.params = c, p
	o.state = faultState{slowdown: 1, healthy: true, ready: max(p.Replicas, 1)}
	o.publish()
	return o, nil
}

// run serves the engine until ctx ends, or until a removed engine's drain
// is over and it holds no request (at the latest one more DrainTimeout
// later); then it fails what is left.
func (o *owner) run(ctx context.Context) {
	defer close(o.e.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	status := time.NewTicker(o.sim.cfg.StatusInterval)
	defer status.Stop()
	retire := o.e.retire
	var giveUp <-chan time.Time
	for {
		now := time.Now()
		o.advance(o.sim.clock.at(now))
		o.revertDue(now)
		o.publish()
		if retire == nil && o.idle() {
			o.failAll()
			return
		}
		timer.Reset(o.nextWake(now))
		select {
		case <-ctx.Done():
			o.failAll()
			return
		case <-giveUp:
			o.failAll()
			return
		case <-retire:
			retire = nil
			t := time.NewTimer(o.sim.cfg.DrainTimeout)
			defer t.Stop()
			giveUp = t.C
		case <-o.e.respec:
			o.respec(time.Now())
		case c := <-o.e.submit:
			o.accept(c)
		case f := <-o.e.faults:
			f.reply <- o.inject(f)
		case <-status.C:
			o.emitStatus(time.Now())
		case <-timer.C:
		}
	}
}

// advance processes every model event at or before v, of the replaced
// cores too, and drops the replaced cores that have finished.
func (o *owner) advance(v int64) {
	o.core.advanceTo(v)
	keep := o.old[:0]
	for _, c := range o.old {
		c.advanceTo(v)
		if _, busy := c.model.NextEventTime(); busy {
			keep = append(keep, c)
		}
	}
	clear(o.old[len(keep):])
	o.old = keep
}

// idle reports whether the engine holds no request.
func (o *owner) idle() bool { return len(o.calls) == 0 && len(o.e.submit) == 0 }

// respec takes the engine's new fleet entry: with other model parameters,
// a new core serves the requests from now on and the old one finishes
// those it holds; injected faults are cleared.
func (o *owner) respec(now time.Time) {
	p := o.e.spec.Load().params
	if reflect.DeepEqual(p, o.params) {
		return
	}
	c, err := newCore(p, o.onFirst, o.onDone)
	if err != nil {
		// Validated by SetFleet (engine.Params of a valid fleet entry).
		o.sim.log.Error("enginesim: new engine parameters", "engine", o.e.name, "err", err)
		return
	}
	o.core.advanceTo(o.sim.clock.at(now))
	if _, busy := o.core.model.NextEventTime(); busy {
		o.old = append(o.old, o.core)
	}
	o.core, o.params = c, p
	o.state = faultState{slowdown: 1, healthy: true, ready: max(p.Replicas, 1)}
	o.reverts = o.reverts[:0]
	o.sim.log.Info("engine parameters changed", "engine", o.e.name)
}

// nextWake is how long to sleep: until the model's next event or the
// next fault revert; an hour when neither is due.
func (o *owner) nextWake(now time.Time) time.Duration {
	next := now.Add(time.Hour)
	for _, c := range append(o.old, o.core) {
		if t, ok := c.model.NextEventTime(); ok && o.sim.clock.wall(t).Before(next) {
			next = o.sim.clock.wall(t)
		}
	}
	for _, r := range o.reverts {
		if r.at.Before(next) {
			next = r.at
		}
	}
	return max(next.Sub(now), 0)
}

// accept submits a call, or fails it at once when no replica is ready or
// the queue is full.
func (o *owner) accept(c *call) {
	now := time.Now()
	v := o.sim.clock.at(now)
	tag := o.nextTag
	o.nextTag++
	c.req.ID, c.req.Tag = tag, tag
	reason := ""
	switch st := o.core.model.Status(); {
	case o.state.healthy && st.ReadyReplicas == 0:
		reason = errNoReplica
	case o.state.healthy && st.Waiting >= o.sim.cfg.MaxWaiting:
		reason = errQueueFull
	}
	if reason != "" {
		d := engine.Done{ID: tag, Tag: tag, ArrivalNs: v, FirstTokenNs: v, FinishNs: v,
			PromptTokens: c.req.PromptTokens, OutputTokens: c.req.OutputTokens, Error: reason}
		o.finish(c, &d, now)
		return
	}
	o.calls[tag] = c
	if err := o.core.submit(v, c.req); err != nil {
		// Only an invalid request gets here; the handler checked it.
		delete(o.calls, tag)
		d := engine.Done{ID: tag, Tag: tag, ArrivalNs: v, FinishNs: v, Error: err.Error()}
		o.finish(c, &d, now)
	}
}

func (o *owner) onFirst(tag uint64, atNs int64) {
	if c := o.calls[tag]; c != nil && c.stream {
		select {
		case c.first <- atNs:
		default: // already told; the core tells each request once
		}
	}
}

func (o *owner) onDone(d *engine.Done) {
	c := o.calls[d.Tag]
	if c == nil {
		return
	}
	delete(o.calls, d.Tag)
	o.finish(c, d, time.Now())
}

// finish publishes the call's completion event and answers it, in that
// order, so that a client holding its answer can rely on the event.
func (o *owner) finish(c *call, d *engine.Done, now time.Time) {
	o.e.count(d.Error)
	out := uint32(d.OutputTokens)
	if d.Error != "" {
		out = 0
	}
	ev := schemas.Event{Kind: schemas.KindCompletion, Completion: schemas.Completion{
		Engine:             o.e.name,
		TimeUnixNano:       now.UnixNano(),
		ConversationID:     c.conv,
		Cluster:            c.cluster,
		PromptTokens:       uint32(d.PromptTokens),
		CachedPromptTokens: uint32(d.CachedTokens),
		OutputTokens:       out,
		TTFTMs:             o.sim.clock.wallMs(d.TTFTMs),
		TBOTMs:             o.sim.clock.wallMs(d.TBOTMs),
		Error:              d.Error,
		Model:              c.model,
	}}
	o.sim.signals.publish(trace.ContextWithSpanContext(context.Background(), c.span), o.e.key, &ev)
	c.done <- result{d: *d}
}

// failAll answers every call still waiting when the simulator stops.
func (o *owner) failAll() {
	for tag, c := range o.calls {
		c.done <- result{d: engine.Done{ID: tag, Tag: tag, Error: errShutdown}}
		delete(o.calls, tag)
	}
	for {
		select {
		case c := <-o.e.submit:
			c.done <- result{d: engine.Done{Error: errShutdown}}
		default:
			return
		}
	}
}

// publish copies the engine's state into the atomics the HTTP handlers
// and metrics read.
func (o *owner) publish() {
	st := o.core.model.Status()
	p := o.core.model.Params()
	e := o.e
	e.healthy.Store(o.state.healthy)
	e.ready.Store(int64(st.ReadyReplicas))
	e.total.Store(int64(st.TotalReplicas))
	running, waiting := st.Running, st.Waiting
	for _, c := range o.old {
		old := c.model.Status()
		running, waiting = running+old.Running, waiting+old.Waiting
	}
	e.running.Store(int64(running))
	e.waiting.Store(int64(waiting))
	e.kvUtil.Store(st.KVUtilization)
	e.slowdown.Store(o.state.slowdown)
	e.errorRate.Store(o.state.errorRate)
	// The decode step now, in wall nanoseconds, paces streamed chunks.
	perSeq := p.DecodePerSeqMs * float64(st.Running) / float64(max(st.ReadyReplicas, 1))
	e.stepWallNs.Store(int64((p.DecodeBaseMs + perSeq) * 1e6 * o.state.slowdown / o.sim.cfg.TimeScale))
}

func (o *owner) emitStatus(now time.Time) {
	st := o.core.model.Status()
	health := schemas.HealthHealthy
	switch {
	case !o.state.healthy || st.ReadyReplicas == 0:
		health = schemas.HealthUnhealthy
	case st.ReadyReplicas < st.TotalReplicas:
		health = schemas.HealthDegraded
	}
	ev := schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{
		Engine:             o.e.name,
		TimeUnixNano:       now.UnixNano(),
		Health:             health,
		ReadyReplicas:      uint32(st.ReadyReplicas),
		TotalReplicas:      uint32(st.TotalReplicas),
		Running:            uint32(st.Running),
		Waiting:            uint32(st.Waiting),
		KVCacheUtilization: min(max(st.KVUtilization, 0), 1),
	}}
	o.sim.signals.publish(context.Background(), o.e.key, &ev)
}
