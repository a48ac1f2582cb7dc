package adapter

import (
	"math"
	"slices"

	"github.com/ilb-router/ilb/schemas"
)

// Interval is what an engine did between two scrapes: the growth of its
// counters and histograms, series by series. A series that shrank, or
// whose incarnation changed (its NAME_created time or pid label), or any
// series after process_start_time_seconds changed, was reset by a
// restart: its growth is its new value, as in Prometheus's rate(). A
// series that disappeared adds nothing, so no growth is ever negative
// and one data-parallel core restarting cannot turn the other cores'
// lifetime totals into a burst of completions.
type Interval struct {
	Finished, Aborted          float64
	PromptTokens, OutputTokens float64
	CachedTokens               float64
	CachedKnown                bool    // CachedTokens is a counter's growth
	HitRate                    float64 // the gauge at the second scrape, -1 when absent
	TTFT, TBOT                 Histogram
	PerRequestTBOT             bool
	// FinishedKnown is false when the engine exports no finished-requests
	// counter; then the TTFT histogram's growth counts the requests.
	FinishedKnown bool
	// Restarted says the server restarted between the scrapes (its
	// process start time changed).
	Restarted bool
}

// Diff returns the interval from prev to cur.
func Diff(prev, cur Sample) Interval {
	r := prev.StartTime > 0 && cur.StartTime > 0 && prev.StartTime != cur.StartTime
	iv := Interval{
		Finished:       grow(prev.Finished, cur.Finished, r),
		Aborted:        grow(prev.Aborted, cur.Aborted, r),
		PromptTokens:   grow(prev.PromptTokens, cur.PromptTokens, r),
		OutputTokens:   grow(prev.OutputTokens, cur.OutputTokens, r),
		CachedTokens:   grow(prev.CachedTokens, cur.CachedTokens, r),
		CachedKnown:    cur.CachedTokens.Present,
		HitRate:        cur.HitRate,
		TTFT:           growHistogram(prev.TTFT, cur.TTFT, r),
		TBOT:           growHistogram(prev.TBOT, cur.TBOT, r),
		PerRequestTBOT: cur.PerRequestTBOT,
		FinishedKnown:  cur.Finished.Present,
		Restarted:      r,
	}
	if cur.FinishedIncludesAborted {
		iv.Finished = max(iv.Finished-iv.Aborted, 0)
	}
	return iv
}

// grow is a counter's growth: the sum of its series' growths.
func grow(prev, cur Counter, restarted bool) float64 {
	total := 0.0
	for _, c := range cur.parts {
		i := slices.IndexFunc(prev.parts, func(p counterPart) bool { return p.key == c.key })
		switch {
		case i < 0 || restarted || prev.parts[i].incarnation != c.incarnation || c.value < prev.parts[i].value:
			total += c.value
		default:
			total += c.value - prev.parts[i].value
		}
	}
	return total
}

// growHistogram is a histogram's growth: the sum of its series' growths.
func growHistogram(prev, cur Histogram, restarted bool) Histogram {
	var d Histogram
	for _, c := range cur.parts {
		i := slices.IndexFunc(prev.parts, func(p histogramPart) bool { return p.key == c.key })
		g := c.h
		if i >= 0 && !restarted && prev.parts[i].incarnation == c.incarnation {
			g = growSeries(prev.parts[i].h, c.h)
		}
		d.add(g)
	}
	return d
}

// growSeries is one series' growth from prev to cur: cur itself when it
// shrank or changed buckets (a reset).
func growSeries(prev, cur Histogram) Histogram {
	if cur.Count < prev.Count || !slices.Equal(prev.Bounds, cur.Bounds) {
		return cur
	}
	d := Histogram{Bounds: cur.Bounds, Counts: make([]float64, len(cur.Counts)), Present: true,
		Count: cur.Count - prev.Count, Sum: max(cur.Sum-prev.Sum, 0)}
	running := 0.0
	for i := range d.Counts {
		running = max(running, cur.Counts[i]-prev.Counts[i])
		d.Counts[i] = min(running, d.Count)
	}
	return d
}

// Quantile returns the q-quantile (0..1) of the observations in h, by
// linear interpolation inside the bucket that holds it, as PromQL's
// histogram_quantile does; the first bucket starts at 0, and a quantile
// in the +Inf bucket is the highest finite bound. NaN without
// observations.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for i, upper := range h.Bounds {
		if h.Counts[i] >= rank && h.Counts[i] > below {
			return lower + (upper-lower)*(rank-below)/(h.Counts[i]-below)
		}
		lower, below = upper, h.Counts[i]
	}
	return h.Bounds[len(h.Bounds)-1]
}

// ErrorAborted is the Error of a synthesized completion for a request the
// engine reports aborted.
const ErrorAborted = "aborted"

// Completions synthesizes the interval's completion events, at most
// limit; it also returns how many it left out. The engine's metrics carry
// no per-request records, so each of the interval's n finished requests
// gets the interval's mean prompt, output and cached tokens, and the
// i-th gets the (i+½)/n quantile of the interval's TTFT histogram (and of
// the per-request TBOT histogram; with only a per-token one, its mean).
// The latencies are thus the interval's distribution at bucket
// resolution, exact in count per bucket. Aborted requests become events
// with Error "aborted" and no tokens. The events have no conversation or
// cluster: those are not in the metrics.
func Completions(engine string, timeUnixNano int64, iv Interval, limit int) (out []schemas.Completion, dropped int) {
	n := int(math.Round(iv.Finished))
	if !iv.FinishedKnown {
		n = int(math.Round(iv.TTFT.Count))
	}
	aborted := int(math.Round(iv.Aborted))
	keep := min(n, limit)
	keepAborted := min(aborted, limit-keep)
	dropped = n - keep + aborted - keepAborted
	if keep+keepAborted == 0 {
		return nil, dropped
	}
	out = make([]schemas.Completion, 0, keep+keepAborted)
	per := perRequest(iv, n)
	for i := range keep {
		c := per
		c.Engine, c.TimeUnixNano = engine, timeUnixNano
		q := (float64(i) + 0.5) / float64(n)
		c.TTFTMs = ms(iv.TTFT.Quantile(q))
		if iv.PerRequestTBOT {
			c.TBOTMs = ms(iv.TBOT.Quantile(q))
		}
		out = append(out, c)
	}
	for range keepAborted {
		out = append(out, schemas.Completion{Engine: engine, TimeUnixNano: timeUnixNano, Error: ErrorAborted})
	}
	return out, dropped
}

// perRequest is one request's share of the interval's tokens.
func perRequest(iv Interval, n int) schemas.Completion {
	var c schemas.Completion
	if n == 0 {
		return c
	}
	prompt := math.Round(iv.PromptTokens / float64(n))
	c.PromptTokens = clampUint32(prompt)
	c.OutputTokens = clampUint32(math.Round(iv.OutputTokens / float64(n)))
	cached := 0.0
	switch {
	case iv.CachedKnown:
		cached = math.Round(iv.CachedTokens / float64(n))
	case iv.HitRate >= 0:
		cached = math.Round(min(iv.HitRate, 1) * prompt)
	}
	c.CachedPromptTokens = min(clampUint32(cached), c.PromptTokens)
	if !iv.PerRequestTBOT && iv.TBOT.Count > 0 {
		c.TBOTMs = ms(iv.TBOT.Sum / iv.TBOT.Count)
	}
	return c
}

// ms converts seconds to milliseconds; NaN and negatives become 0.
func ms(s float64) float64 {
	if !(s > 0) || math.IsInf(s, 0) {
		return 0
	}
	return s * 1000
}

func clampUint32(v float64) uint32 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}

// Status is the status event of a successful scrape.
func Status(engine string, timeUnixNano int64, s Sample) schemas.EngineStatus {
	return schemas.EngineStatus{
		Engine:             engine,
		TimeUnixNano:       timeUnixNano,
		Health:             schemas.HealthHealthy,
		ReadyReplicas:      uint32(s.Ranks),
		TotalReplicas:      uint32(s.Ranks),
		Running:            clampUint32(math.Round(s.Running)),
		Waiting:            clampUint32(math.Round(s.Waiting)),
		KVCacheUtilization: min(max(s.KVUsage, 0), 1),
	}
}

// Unreachable is the status event of a failed scrape: unhealthy, no
// ready replica, totalReplicas as last seen.
func Unreachable(engine string, timeUnixNano int64, totalReplicas int) schemas.EngineStatus {
	return schemas.EngineStatus{Engine: engine, TimeUnixNano: timeUnixNano, Health: schemas.HealthUnhealthy,
		TotalReplicas: uint32(max(totalReplicas, 1))}
}
