package aggregator

import (
	"slices"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
)

// Several instances, one fitter.
//
// Fits that pool windows of several signals partitions (a SKU's engines
// are spread over them) must happen once for the group, on every window,
// not once per instance on the windows it owns. The fitter is the
// instance that owns signals partition 0 (there always is one while the
// group has members, and it moves with the partition). It fits every
// engine and SKU on the history of every partition: its own windows as it
// emits them, the others' as the read-back reads them from ilb.features.
// A fit at event time T waits until every partition that is not idle has
// got to T: its own by what they emitted, the others by what was
// published. The other instances fit nothing.
//
// When partition 0 moves (a rebalance, a crash), the new fitter first
// reads what has been published, then continues the schedule after the
// newest fit on ilb.profiles and from its profile table, so that no fit
// time is published twice or skipped, and a refused refit keeps the
// previous profile as it would have with one instance.

// fitterPartition is the signals partition whose owner fits.
const fitterPartition int32 = 0

// becomeFitterLocked makes this instance the fitter: it takes over the
// schedule and the table of the newest fit published (event clock).
func (a *Aggregator) becomeFitterLocked() {
	a.fitter.Store(true)
	a.fitterSince = a.now()
	if a.rb == nil || a.cfg.Clock != ClockEvent {
		return
	}
	asOf, table := a.rb.lastProfiles()
	if asOf <= a.lastFitAt {
		return // our own fits are the newest
	}
	a.prof.current = map[profKey]schemas.Profile{}
	a.prof.fits = map[profKey]regress.Profile{}
	for _, p := range table {
		k := keyOf(p)
		a.prof.current[k] = p
		a.prof.fits[k] = regress.Profile{SLOCapacityRPS: p.SLOCapacityRPS}
	}
	a.storeProfilesView()
	a.lastFitAt, a.pending = asOf, false
	a.nextFit = asOf + int64(a.cfg.ProfileInterval)
	a.log.Info("aggregator: fitting profiles for the group, after the fit published as of",
		"as_of", time.Unix(0, asOf).UTC(), "profiles", len(table))
}

// partitionsMoved notes that this instance gained or lost partitions:
// owning partition 0 makes it the fitter.
func (a *Aggregator) partitionsMovedLocked(gained, lost []int32) {
	if slices.Contains(lost, fitterPartition) {
		a.fitter.Store(false)
	}
	if slices.Contains(gained, fitterPartition) {
		a.becomeFitterLocked()
	}
}

// othersReachedLocked lowers low to the newest window published by every
// signals partition this instance does not own, leaving out those idle
// for longer than a partition's windows take to come (the same rule as
// for an owned partition, plus the time a window is held open). A
// partition that has published nothing holds the fits back for as long
// after this instance became the fitter: its owner may be about to
// publish its first windows. false: a partition holds them back.
func (a *Aggregator) othersReachedLocked(low int64, now time.Time) (int64, bool) {
	if a.rb == nil {
		return low, true
	}
	idle := a.cfg.IdleTimeout + a.cfg.Window + a.cfg.OutOfOrder + a.cfg.AllowedLateness
	pub, seen := a.rb.frontiers()
	for p := range a.rb.signalsPartitions() {
		if _, own := a.core.parts[p]; own {
			continue
		}
		e, ok := pub[p]
		switch {
		case !ok && now.Sub(a.fitterSince) < idle:
			return 0, false
		case !ok || now.Sub(seen[p]) >= idle:
			continue
		}
		if low == 0 || e < low {
			low = e
		}
	}
	return low, true
}
