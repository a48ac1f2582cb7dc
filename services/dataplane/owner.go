package dataplane

import (
	"context"
	"time"
)

// runOwner is the owner loop: once per TickInterval it advances the
// windows, the conversation epoch, staleness, status expiry and the
// outlier sweep; a kick from the proxy makes it eject at once.
func (d *DataPlane) runOwner(ctx context.Context) error {
	t := time.NewTicker(d.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			d.tick()
		case <-d.kick:
			d.ejectNow()
		}
	}
}

// wake asks the owner to look for engines to eject; it never blocks, and
// kicks that arrive while one is pending coalesce.
func (d *DataPlane) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *DataPlane) ejectNow() {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ejectConsecutiveLocked(now) {
		d.rebuildLocked(now)
	}
}

// tick does the periodic work under the lock, then rebuilds the pickers
// whose routing changed.
func (d *DataPlane) tick() {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	step := max(d.cfg.ConversationIdle/convoEpochs, time.Nanosecond)
	d.epoch.Store(uint32(now.Sub(d.started) / step))
	d.expireEjectionsLocked(now)
	d.expireDrainsLocked(now)
	d.ejectConsecutiveLocked(now)
	if now.Sub(d.lastSweep) >= d.cfg.Outlier.Interval {
		d.sweepLocked(now)
		d.lastSweep = now
	}
	for _, e := range d.reg.byName {
		e.live.refreshLocked(e.statusAt, now, d.cfg.StatusTTL)
	}
	for _, c := range d.order {
		if stale := c.isStaleLocked(now, d.cfg.StaleAfter); stale != c.stale {
			c.stale = stale
			d.logStale(c, now)
		}
		c.advanceLocked(d.cfg, d.utilisationLocked(c, now))
	}
	d.rebuildLocked(now)
}

func (d *DataPlane) logStale(c *cluster, now time.Time) {
	age := now.Sub(c.snap.CreatedAt).Round(time.Second)
	if c.stale {
		d.log.Warn("snapshot is stale: stale policy on (table kept, no shedding, spill on equal shares)",
			"cluster", c.name, "version", c.snap.Version, "age", age, "stale_after", d.cfg.StaleAfter)
		return
	}
	d.log.Info("snapshot fresh again", "cluster", c.name, "version", c.snap.Version, "age", age)
}

// pickerParamsLocked gathers the process-wide inputs of picker builds.
func (d *DataPlane) pickerParamsLocked(now time.Time) pickerParams {
	return pickerParams{
		now: now, statusTTL: d.cfg.StatusTTL, needURL: d.needURL,
		spill: d.cfg.SpillFactor, penalty: d.cfg.Outlier.LatencyPenaltyShare, cat: d.cat.Load(),
	}
}

// rebuildLocked builds every cluster's picker and swaps in those that
// route differently from the current one.
func (d *DataPlane) rebuildLocked(now time.Time) {
	pp := d.pickerParamsLocked(now)
	for _, c := range d.order {
		p := c.buildLocked(d.reg, pp)
		if !sameRouting(p, c.cur.Load()) {
			c.cur.Store(p)
		}
	}
}

// utilisationLocked is the cluster's weighted engine utilisation: Σ
// share × utilisation over the engines of its current picker.
func (d *DataPlane) utilisationLocked(c *cluster, now time.Time) float64 {
	p := c.cur.Load()
	u := 0.0
	for i := range p.slots {
		u += p.slots[i].share * p.slots[i].eng.utilisationLocked(now, d.cfg.StatusTTL)
	}
	return u
}
