package console

import "time"

// SLOWindow is the span of the recent SLO attainment and goodput: the
// minute before each sample.
const SLOWindow = time.Minute

// outcomes counts the traffic's requests that came back: answered, shed
// or failed. Requests in flight are not judged yet.
func outcomes(t *TrafficCluster) int64 { return t.OK + t.Shed + t.Errors }

// sloView is cluster ci's SLO attainment and goodput at now from its
// traffic counters t: since the start, and over SLOWindow against the
// history's sample at the window's start (or the start of Run when the
// history is younger). Call it before this sample joins the history.
func (c *Console) sloView(ci int, t *TrafficCluster, now time.Time) *SLOView {
	done := outcomes(t)
	if done <= 0 {
		return nil
	}
	v := &SLOView{Good: t.Good, Outcomes: done, Attainment: round4(ratio(t.Good, done))}
	baseGood, baseDone, baseAt := int64(0), int64(0), c.started
	if p := c.hist.before(now.Add(-SLOWindow).UnixMilli()); p != nil && p.clusters[ci].counted {
		cp := &p.clusters[ci]
		baseGood, baseDone, baseAt = cp.good, cp.outcomes, time.UnixMilli(p.t)
	}
	if baseAt.IsZero() || baseDone > done || baseGood > t.Good {
		// No start to measure from, or the counters went back (a
		// restarted source): the window is everything counted.
		baseGood, baseDone, baseAt = 0, 0, now
	}
	v.Outcomes1m = done - baseDone
	v.Attainment1m = round4(ratio(t.Good-baseGood, v.Outcomes1m))
	if span := now.Sub(baseAt); span > 0 {
		v.WindowSeconds = round4(span.Seconds())
		v.GoodputRPS1m = round4(float64(t.Good-baseGood) / span.Seconds())
	}
	return v
}
