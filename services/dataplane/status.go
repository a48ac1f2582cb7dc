package dataplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
)

// maxStatusEngines bounds how many engines statuses may introduce, so a
// producer of garbage names cannot grow the registry without limit.
const maxStatusEngines = 1 << 14

// ObserveStatus applies one engine status, as the Kafka consumer does: an
// unhealthy engine, or one with no ready replica, becomes unavailable and
// its conversations go to their next choice. A status older than the last
// one applied for the engine is ignored.
func (d *DataPlane) ObserveStatus(st schemas.EngineStatus) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.statusLocked(&st, now) {
		d.rebuildLocked(now)
	}
}

// statusLocked records st and reports whether the engine's availability
// changed.
func (d *DataPlane) statusLocked(st *schemas.EngineStatus, now time.Time) bool {
	e, ok := d.reg.byName[st.Engine]
	if !ok {
		if len(d.reg.byName) >= maxStatusEngines {
			return false
		}
		e = d.reg.getLocked(st.Engine)
	}
	if !e.statusAt.IsZero() && st.TimeUnixNano < e.status.TimeUnixNano {
		return false
	}
	before, _ := e.availableLocked(now, d.cfg.StatusTTL)
	e.status, e.statusAt = *st, now
	e.live.observeStatusLocked(st)
	after, why := e.availableLocked(now, d.cfg.StatusTTL)
	if before != after {
		d.log.Info("engine availability changed", "engine", e.name, "available", after, "reason", why.String(),
			"health", int(st.Health), "ready_replicas", st.ReadyReplicas)
	}
	return before != after
}

// runSignals reads engine status events from Kafka: a plain consumer, not
// a group, so every data plane reads every partition, from the end (only
// live status matters). Records that do not decode are counted and
// skipped.
func (d *DataPlane) runSignals(ctx context.Context) error {
	opts, err := d.deps.Kafka.Opts()
	if err != nil {
		return fmt.Errorf("status consumer: %w", err)
	}
	opts = append(opts,
		kgo.ConsumeTopics(d.cfg.SignalsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("status consumer: %w", err)
	}
	defer cl.Close()
	dec := schemas.NewDecoder(maxStatusEngines)
	var lastWarn time.Time
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && d.now().Sub(lastWarn) > 30*time.Second {
				lastWarn = d.now()
				d.log.Warn("status consumer: fetch error (retrying)", "topic", topic, "partition", p, "err", err)
			}
		})
		d.applyRecords(fs, dec)
	}
}

// applyRecords applies one poll's status events under one lock and one
// rebuild.
func (d *DataPlane) applyRecords(fs kgo.Fetches, dec *schemas.Decoder) {
	var ev schemas.Event
	bad := int64(0)
	now := d.now()
	changed := false
	d.mu.Lock()
	fs.EachRecord(func(r *kgo.Record) {
		if err := dec.Decode(r.Value, &ev); err != nil {
			bad++
			return
		}
		if ev.Kind == schemas.KindStatus {
			changed = d.statusLocked(&ev.Status, now) || changed
		}
	})
	if changed {
		d.rebuildLocked(now)
	}
	d.mu.Unlock()
	if bad > 0 {
		d.metrics.signalsBad.Add(context.Background(), bad)
	}
}
