package aggregator

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
)

// profileLoop refits every ProfileInterval (wall clock), or at once when
// Refit asks. With the event clock the consumer loop refits instead
// (fitDueLocked) and this loop is not run.
func (a *Aggregator) profileLoop(ctx context.Context, cl *kgo.Client) error {
	t := time.NewTicker(a.cfg.ProfileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.refit:
		}
		if !a.fitter.Load() {
			continue // the owner of partition 0 fits for the group (fitter.go)
		}
		fctx, span := a.tracer.Start(ctx, "aggregator.fit")
		if rec, err := a.fitProfiles(fctx, math.MaxInt64, a.now()); err != nil {
			a.cnt.publishFailed.Add(1)
			a.log.Warn("aggregator: profiles; will retry", "err", err)
		} else if rec != nil {
			if err := a.produceProfiles(fctx, cl, rec); err != nil {
				a.cnt.publishFailed.Add(1)
				a.log.Warn("aggregator: publish profiles; will retry", "err", err)
			} else {
				a.pending = false
			}
		}
		span.End()
	}
}

// fitDueLocked is the event clock's refit, called by the consumer loop
// after each batch with a.mu held: it fits at every multiple of
// ProfileInterval that the emitted windows of every owned partition have
// reached (the first one at or after the earliest window held), on the
// windows ending by then, and queues each resulting profiles record with
// the features, so it is published, and offsets committed, with them. A
// Refit request fits at once on every window emitted.
func (a *Aggregator) fitDueLocked(ctx context.Context, now time.Time) {
	if !a.fitter.Load() {
		select {
		case <-a.refit: // the fitter (fitter.go) fits; nothing to do here
		default:
		}
		return
	}
	var at []int64
	if reached, ok := a.emittedLocked(now); ok {
		step := int64(a.cfg.ProfileInterval)
		if first := a.hist.earliest(); a.nextFit == 0 && first > 0 {
			a.nextFit = (first + step - 1) / step * step
		}
		for ; a.nextFit > 0 && a.nextFit <= reached; a.nextFit += step {
			at = append(at, a.nextFit)
		}
	}
	select {
	case <-a.refit:
		// An operator's refit: on everything emitted so far.
		var newest int64
		for _, e := range a.emitted {
			newest = max(newest, e)
		}
		if newest > 0 && (len(at) == 0 || at[len(at)-1] != newest) {
			at = append(at, newest)
		}
	default:
	}
	for _, t := range at {
		fctx, span := a.tracer.Start(ctx, "aggregator.fit")
		rec, err := a.fitProfiles(fctx, t, time.Unix(0, t))
		if err != nil {
			a.log.Warn("aggregator: profiles", "err", err)
		}
		if rec != nil {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderAsOf, Value: strconv.AppendInt(nil, t, 10)})
			a.core.outbox = append(a.core.outbox, rec)
			a.core.announceProfiles(t)
			a.pending = false
		}
		a.lastFitAt = max(a.lastFitAt, t)
		span.End()
	}
}

// emittedLocked returns the window end that every owned partition which
// has applied events has emitted up to, and every other partition has
// published up to (fitter.go); false while an owned one has emitted
// nothing, or has not been read from since it was assigned. A partition
// that has received nothing for IdleTimeout (wall time: every engine
// keyed to it went silent, or it never had any) does not hold the refits
// back.
func (a *Aggregator) emittedLocked(now time.Time) (int64, bool) {
	var low int64
	for p, ps := range a.core.parts {
		switch {
		case now.Sub(ps.lastArrival) >= a.cfg.IdleTimeout:
			continue
		case !ps.fetched:
			// Nothing read yet: its records may just not have been
			// fetched (a backlog, a replay), so it may have events that
			// belong in the fit. It holds the fit back until idle.
			return 0, false
		case ps.maxEventNs == 0:
			continue
		}
		e, ok := a.emitted[p]
		if !ok {
			return 0, false
		}
		if low == 0 || e < low {
			low = e
		}
	}
	low, ok := a.othersReachedLocked(low, now)
	return low, ok && low > 0
}

// fitProfiles refits every engine and SKU on the windows ending by upTo,
// stamping accepted fits with at, and returns the profiles record to
// publish when a fit was accepted (or an earlier publish failed); nil
// when there is nothing to publish.
func (a *Aggregator) fitProfiles(ctx context.Context, upTo int64, at time.Time) (*kgo.Record, error) {
	a.takeFleetUpdate()
	results, accepted := a.prof.fit(a.hist.snapshot(upTo), at)
	for _, r := range results {
		if r.Accepted {
			continue
		}
		a.cnt.refuse(r.Reason)
		level := a.log.Info
		if r.Reason == "too_few_samples" {
			level = a.log.Debug
		}
		level("aggregator: profile refused", "engine", r.Engine, "sku", r.SKU, "reason", r.Reason, "samples", r.Samples, "err", r.Error)
	}
	a.pending = a.pending || accepted
	a.storeProfilesView()
	if !a.pending {
		return nil, nil
	}
	return a.profilesRecord(ctx, at)
}

// profilesRecord encodes the profile table as an ilb.profiles record (and
// writes it to the profiles file); nil when the table is empty.
func (a *Aggregator) profilesRecord(ctx context.Context, at time.Time) (*kgo.Record, error) {
	table := a.prof.table()
	if len(table) == 0 {
		return nil, nil
	}
	batch := schemas.ProfilesToRecord(nil, table)
	defer batch.Release()
	if a.profFile != nil {
		if err := a.profFile.write(batch, a.now()); err != nil {
			a.log.Error("aggregator: profiles file", "err", err)
		}
	}
	value, err := arrowipc.EncodeStream(schemas.ProfileSchema, batch)
	if err != nil {
		return nil, fmt.Errorf("aggregator: encode profiles: %w", err)
	}
	rec := &kgo.Record{
		Topic: a.cfg.ProfilesTopic, Key: []byte(ProfilesKey), Value: value, Timestamp: at,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.ProfileSchemaVersion)}},
	}
	kafka.InjectTrace(ctx, a.prop, rec)
	return rec, nil
}

// produceProfiles publishes rec and waits for the acknowledgement.
func (a *Aggregator) produceProfiles(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	pctx, cancel := context.WithTimeout(ctx, a.cfg.PublishTimeout)
	defer cancel()
	if err := cl.ProduceSync(pctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("aggregator: publish profiles: %w", err)
	}
	a.cnt.profilesPublished.Add(1)
	return nil
}

// ProfilesKey is the key of every ilb.profiles record.
const ProfilesKey = "profiles"

// storeProfilesView publishes the profiles and fit attempts to HTTP.
func (a *Aggregator) storeProfilesView() {
	v := &ProfilesView{Profiles: []ProfileJSON{}, Fits: []FitResult{}}
	for _, p := range a.prof.table() {
		v.Profiles = append(v.Profiles, ProfileJSON{
			Engine: p.Engine, SKU: p.SKU, FittedAt: time.Unix(0, p.FittedAtUnixNano).UTC(),
			CapacityRPS: p.CapacityRPS, SLOCapacityRPS: a.prof.fits[keyOf(p)].SLOCapacityRPS,
			TTFTBaseMs: p.TTFTBaseMs, TTFTQueueMs: p.TTFTQueueMs, TBOTBaseMs: p.TBOTBaseMs, TBOTSlopeMs: p.TBOTSlopeMs,
			TTFTR2: p.TTFTR2, TBOTR2: p.TBOTR2, Samples: p.Samples, LoadMinRPS: p.LoadMinRPS, LoadMaxRPS: p.LoadMaxRPS,
		})
	}
	for _, k := range slices.SortedFunc(maps.Keys(a.prof.last), profKey.compare) {
		v.Fits = append(v.Fits, a.prof.last[k])
	}
	a.profiles.Store(v)
}

func keyOf(p schemas.Profile) profKey {
	if p.Engine != "" {
		return profKey{engine: p.Engine}
	}
	return profKey{sku: p.SKU}
}
