package dataplane

import (
	"context"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Ejection reasons: the reason label of ilb_dataplane_ejections_total.
const (
	ejectConsecutive = "consecutive_5xx"
	ejectSuccessRate = "success_rate"
)

// routedLocked returns the engines that own slots in any cluster's table,
// in name order: the hosts outlier detection compares and caps over.
func (d *DataPlane) routedLocked() []*engine {
	seen := map[string]*engine{}
	for _, c := range d.order {
		for _, p := range c.cur.Load().all() {
			if p.table == nil {
				continue
			}
			for i, n := range p.table.Counts() { // the table's slots, not the overflow's
				if n > 0 {
					seen[p.slots[i].eng.name] = p.slots[i].eng
				}
			}
		}
	}
	out := make([]*engine, 0, len(seen))
	for _, name := range sortedKeys(seen) {
		out = append(out, seen[name])
	}
	return out
}

func ejected(e *engine, now time.Time) bool {
	return !e.ejectedUntil.IsZero() && now.Before(e.ejectedUntil)
}

// ejectLocked ejects e unless the cap forbids it. As in Envoy, an
// ejection is allowed while the ejected share of the routed engines is
// below MaxEjectionPercent, so one engine can always be ejected (with the
// default 10%: one of up to 10 engines, two of 11 to 20, ...). The
// ejection lasts BaseEjection × the times e was ejected, at most
// MaxEjection.
func (d *DataPlane) ejectLocked(e *engine, now time.Time, reason string) bool {
	hosts := d.routedLocked()
	n := 0
	for _, h := range hosts {
		if ejected(h, now) {
			n++
		}
	}
	if 100*float64(n) >= d.cfg.Outlier.MaxEjectionPercent*float64(len(hosts)) {
		d.log.Warn("outlier not ejected: ejection cap reached", "engine", e.name, "reason", reason,
			"ejected", n, "engines", len(hosts), "max_ejection_percent", d.cfg.Outlier.MaxEjectionPercent)
		return false
	}
	e.ejections++
	dur := min(d.cfg.Outlier.BaseEjection*time.Duration(e.ejections), d.cfg.Outlier.MaxEjection)
	e.ejectedUntil = now.Add(dur)
	e.consec5xx.Store(0)
	d.metrics.ejections.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("engine", e.name), attribute.String("reason", reason)))
	d.log.Warn("engine ejected", "engine", e.name, "reason", reason, "for", dur)
	return true
}

// ejectConsecutiveLocked ejects engines with Consecutive5xx failures in a
// row. It reports whether any was ejected.
func (d *DataPlane) ejectConsecutiveLocked(now time.Time) bool {
	changed := false
	for _, e := range d.routedLocked() {
		if !ejected(e, now) && e.consec5xx.Load() >= int64(d.cfg.Outlier.Consecutive5xx) {
			changed = d.ejectLocked(e, now, ejectConsecutive) || changed
		}
	}
	return changed
}

// expireEjectionsLocked returns engines whose ejection time is over.
func (d *DataPlane) expireEjectionsLocked(now time.Time) {
	for _, name := range sortedKeys(d.reg.byName) {
		e := d.reg.byName[name]
		if !e.ejectedUntil.IsZero() && !now.Before(e.ejectedUntil) {
			e.ejectedUntil = time.Time{}
			e.consec5xx.Store(0)
			d.log.Info("engine returned to service after ejection", "engine", e.name)
		}
	}
}

// engineStats are one engine's outcomes over one sweep interval.
type engineStats struct {
	e                   *engine
	requests, successes int64
	failures            int64
	latencyUs           int64
}

// sweepLocked runs the interval checks. Success rate (Envoy): among
// engines with at least RequestVolume requests, if there are MinHosts of
// them, eject those whose success rate is below mean − StdevFactor·stdev.
// Latency (ilb's addition, same statistics): a qualifying engine whose mean
// time to headers is above mean + StdevFactor·stdev is penalised until a
// later sweep finds it in line. Note the population stdev bounds the
// z-score of a single outlier among n engines by √(n−1), so with factor
// 1.9 one bad engine is only found among 5 or more (Envoy's default
// minimum), whatever MinHosts says.
func (d *DataPlane) sweepLocked(now time.Time) {
	var stats []engineStats
	for _, name := range sortedKeys(d.reg.byName) {
		e := d.reg.byName[name]
		st := engineStats{e: e, requests: e.requests.Swap(0), failures: e.failures.Swap(0),
			successes: e.successes.Swap(0), latencyUs: e.latencyUs.Swap(0)}
		if ejected(e, now) {
			continue
		}
		if e.ejections > 0 && st.failures == 0 {
			e.ejections-- // Envoy: a healthy interval shortens the next ejection
		}
		if st.requests >= d.cfg.Outlier.RequestVolume {
			stats = append(stats, st)
		}
	}
	d.sweepSuccessRateLocked(stats, now)
	d.sweepLatencyLocked(stats)
}

func (d *DataPlane) sweepSuccessRateLocked(stats []engineStats, now time.Time) {
	if len(stats) < d.cfg.Outlier.MinHosts {
		return
	}
	rates := make([]float64, len(stats))
	for i, st := range stats {
		rates[i] = float64(st.requests-st.failures) / float64(st.requests)
	}
	mean, sd := meanStdev(rates)
	limit := mean - d.cfg.Outlier.StdevFactor*sd
	for i, st := range stats {
		if rates[i] < limit {
			d.ejectLocked(st.e, now, ejectSuccessRate)
		}
	}
}

func (d *DataPlane) sweepLatencyLocked(stats []engineStats) {
	var lat []float64
	var who []*engine
	for _, st := range stats {
		if st.successes > 0 {
			lat = append(lat, float64(st.latencyUs)/float64(st.successes))
			who = append(who, st.e)
		}
	}
	for _, name := range sortedKeys(d.reg.byName) {
		d.reg.byName[name].latencyOut = false
	}
	if len(lat) < d.cfg.Outlier.MinHosts {
		return
	}
	mean, sd := meanStdev(lat)
	for i, e := range who {
		if lat[i] > mean+d.cfg.Outlier.StdevFactor*sd {
			e.latencyOut = true
			d.log.Warn("engine penalised as a latency outlier", "engine", e.name,
				"mean_latency_ms", lat[i]/1e3, "peers_mean_ms", mean/1e3, "peers_stdev_ms", sd/1e3)
		}
	}
}

// meanStdev returns the mean and population standard deviation.
func meanStdev(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)))
}
