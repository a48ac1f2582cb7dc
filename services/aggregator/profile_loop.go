package aggregator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
)

// profileLoop refits every ProfileInterval, or at once when Refit asks.
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
		a.fitProfiles(ctx, cl)
	}
}

// fitProfiles refits every engine and SKU from the history, and publishes
// the profile table when a fit was accepted (or an earlier publish
// failed).
func (a *Aggregator) fitProfiles(ctx context.Context, cl *kgo.Client) {
	ctx, span := a.tracer.Start(ctx, "aggregator.fit")
	defer span.End()
	now := a.now()
	results, accepted := a.prof.fit(a.hist.snapshot(), now)
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
		return
	}
	if err := a.publishProfiles(ctx, cl, now); err != nil {
		a.cnt.publishFailed.Add(1)
		a.log.Warn("aggregator: publish profiles; will retry", "err", err)
		return
	}
	a.pending = false
}

func (a *Aggregator) publishProfiles(ctx context.Context, cl *kgo.Client, now time.Time) error {
	table := a.prof.table()
	if len(table) == 0 {
		return nil
	}
	batch := schemas.ProfilesToRecord(nil, table)
	defer batch.Release()
	if a.profFile != nil {
		if err := a.profFile.write(batch, now); err != nil {
			a.log.Error("aggregator: profiles file", "err", err)
		}
	}
	value, err := arrowipc.EncodeStream(schemas.ProfileSchema, batch)
	if err != nil {
		return fmt.Errorf("aggregator: encode profiles: %w", err)
	}
	rec := &kgo.Record{
		Topic: a.cfg.ProfilesTopic, Key: []byte(ProfilesKey), Value: value, Timestamp: now,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.ProfileSchemaVersion)}},
	}
	kafka.InjectTrace(ctx, a.prop, rec)
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
