package adapter

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is what one scrape of an engine's /metrics says, summed over the
// engine's series (data-parallel ranks, several models); see README.md
// for the metric names read per Kind.
type Sample struct {
	Running, Waiting float64
	// KVUsage is the KV cache in use, 0..1 (the mean over ranks); -1 when
	// the engine does not export it.
	KVUsage float64
	// Ranks is the number of data-parallel engine cores reporting (vLLM's
	// "engine" label); 1 without the label.
	Ranks int

	TTFT Histogram // seconds, one observation per request
	// TBOT is seconds per output token: per request when PerRequestTBOT,
	// else per token (inter-token latency).
	TBOT           Histogram
	PerRequestTBOT bool

	Finished, Aborted          Counter // requests
	PromptTokens, OutputTokens Counter
	// CachedTokens counts prompt tokens found in the prefix cache; when
	// absent, HitRate (a 0..1 gauge, -1 when absent) stands in.
	CachedTokens Counter
	HitRate      float64
}

// Counter is a cumulative count; Present says the engine exports it.
type Counter struct {
	Value   float64
	Present bool
}

// Histogram is a cumulative Prometheus histogram: Counts[i] observations
// at most Bounds[i], increasing bounds, +Inf excluded (Count has it).
type Histogram struct {
	Bounds  []float64
	Counts  []float64
	Count   float64
	Sum     float64
	Present bool
}

// ParseError is a /metrics body that is not Prometheus text format.
type ParseError struct{ Err error }

func (e *ParseError) Error() string { return "adapter: parse metrics: " + e.Err.Error() }
func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads a Prometheus text exposition as an engine of kind exposes it.
func Parse(r io.Reader, kind Kind) (Sample, error) {
	names, ok := metricNames[kind]
	if !ok {
		return Sample{}, fmt.Errorf("adapter: unknown engine kind %q", kind)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Sample{}, &ParseError{err}
	}
	f := families(mfs)
	s := Sample{
		Running:      f.gauge(names.running...).sum,
		Waiting:      f.gauge(names.waiting...).sum,
		KVUsage:      f.gauge(names.kvUsage...).mean,
		HitRate:      f.gauge(names.hitRate...).mean,
		Ranks:        f.ranks(names.running...),
		TTFT:         f.histogram(names.ttft...),
		PromptTokens: f.counter(names.promptTokens...),
		OutputTokens: f.counter(names.outputTokens...),
		CachedTokens: f.counter(names.cachedTokens...),
	}
	s.TBOT = f.histogram(names.tbotPerRequest...)
	s.PerRequestTBOT = s.TBOT.Present
	if !s.TBOT.Present {
		s.TBOT = f.histogram(names.tbotPerToken...)
	}
	s.Finished, s.Aborted = f.requests(names)
	return s, nil
}

// families wraps the parsed families with lookups that sum over series.
type families map[string]*dto.MetricFamily

// series returns the metrics of the first present name, skipping
// non-zero tensor and pipeline ranks (SGLang labels every rank's copy of
// the same numbers).
func (f families) series(names ...string) []*dto.Metric {
	for _, n := range names {
		mf := f[n]
		if mf == nil {
			continue
		}
		var out []*dto.Metric
		for _, m := range mf.GetMetric() {
			if label(m, "tp_rank", "0") == "0" && label(m, "pp_rank", "0") == "0" {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

func label(m *dto.Metric, name, def string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return def
}

type gaugeAgg struct{ sum, mean float64 }

// gauge sums (and averages) a gauge over its series; mean is -1 when the
// gauge is absent.
func (f families) gauge(names ...string) gaugeAgg {
	ms := f.series(names...)
	if len(ms) == 0 {
		return gaugeAgg{mean: -1}
	}
	var g gaugeAgg
	for _, m := range ms {
		g.sum += finite(m.GetGauge().GetValue())
	}
	g.mean = g.sum / float64(len(ms))
	return g
}

// ranks counts the distinct values of vLLM's "engine" label.
func (f families) ranks(names ...string) int {
	var seen []string
	for _, m := range f.series(names...) {
		if v := label(m, "engine", ""); v != "" && !slices.Contains(seen, v) {
			seen = append(seen, v)
		}
	}
	return max(len(seen), 1)
}

func (f families) counter(names ...string) Counter {
	ms := f.series(names...)
	c := Counter{Present: len(ms) > 0}
	for _, m := range ms {
		c.Value += finite(m.GetCounter().GetValue()) + finite(m.GetUntyped().GetValue())
	}
	return c
}

// requests splits the finished-requests counter into finished (served)
// and aborted ones.
func (f families) requests(n names) (finished, aborted Counter) {
	for _, m := range f.series(n.finished...) {
		v := finite(m.GetCounter().GetValue())
		if label(m, "finished_reason", "") == "abort" {
			aborted.Value += v
		} else {
			finished.Value += v
		}
		finished.Present, aborted.Present = true, true
	}
	if ab := f.counter(n.aborted...); ab.Present {
		// SGLang counts aborted requests apart, and in its total.
		finished.Value = max(finished.Value-ab.Value, 0)
		aborted = ab
	}
	return finished, aborted
}

// histogram sums a histogram over its series; series with other bucket
// bounds than the first are skipped.
func (f families) histogram(names ...string) Histogram {
	var h Histogram
	for _, m := range f.series(names...) {
		mh := m.GetHistogram()
		bounds, counts := buckets(mh)
		if !h.Present {
			h = Histogram{Bounds: bounds, Counts: counts, Present: true}
		} else if !slices.Equal(bounds, h.Bounds) {
			continue
		} else {
			for i := range counts {
				h.Counts[i] += counts[i]
			}
		}
		h.Count += float64(mh.GetSampleCount()) + finite(mh.GetSampleCountFloat())
		h.Sum += finite(mh.GetSampleSum())
	}
	return h
}

// buckets returns a histogram's finite buckets sorted by bound, with
// cumulative counts made non-decreasing (a malformed exposition cannot
// produce negative bucket counts downstream).
func buckets(mh *dto.Histogram) (bounds, counts []float64) {
	bs := slices.Clone(mh.GetBucket())
	slices.SortFunc(bs, func(a, b *dto.Bucket) int { return cmp.Compare(a.GetUpperBound(), b.GetUpperBound()) })
	running := 0.0
	for _, b := range bs {
		ub := b.GetUpperBound()
		if math.IsInf(ub, 0) || math.IsNaN(ub) || len(bounds) > 0 && ub == bounds[len(bounds)-1] {
			continue
		}
		running = max(running, float64(b.GetCumulativeCount())+finite(b.GetCumulativeCountFloat()))
		bounds = append(bounds, ub)
		counts = append(counts, running)
	}
	return bounds, counts
}

// finite maps NaN and infinities (an idle vLLM reports NaN for some
// gauges) to 0.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
