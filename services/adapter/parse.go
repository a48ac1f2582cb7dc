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
	// "engine" label, SGLang's "dp_rank"); 1 without such labels.
	Ranks int
	// Missing lists the load quantities ("running", "waiting",
	// "kv_cache") the body has no family for; they read as 0. HasLoad is
	// false when all three are missing.
	Missing []string
	// StartTime is process_start_time_seconds, 0 when absent; a change
	// means the server restarted and every counter starts over.
	StartTime float64

	TTFT Histogram // seconds, one observation per request
	// TBOT is seconds per output token: per request when PerRequestTBOT,
	// else per token (inter-token latency).
	TBOT           Histogram
	PerRequestTBOT bool

	Finished, Aborted Counter // requests
	// FinishedIncludesAborted says Finished counts the aborted ones too
	// (SGLang's num_requests_total); Diff subtracts them.
	FinishedIncludesAborted    bool
	PromptTokens, OutputTokens Counter
	// CachedTokens counts prompt tokens found in the prefix cache; when
	// absent, HitRate (a 0..1 gauge, -1 when absent) stands in.
	CachedTokens Counter
	HitRate      float64
}

// HasLoad says the body had at least one of the running, waiting and KV
// families: without any, it is not the engine's metrics (a wrong URL or
// --kind), and an idle healthy status would be a lie.
func (s Sample) HasLoad() bool { return len(s.Missing) < 3 }

// Counter is a cumulative count summed over series; Present says the
// engine exports it. Diff works per series, so that one data-parallel
// core restarting does not look like the whole engine's reset.
type Counter struct {
	Value   float64
	Present bool
	parts   []counterPart
}

type counterPart struct {
	key, incarnation string
	value            float64
}

// Histogram is a cumulative Prometheus histogram: Counts[i] observations
// at most Bounds[i], increasing bounds, +Inf excluded (Count has it).
type Histogram struct {
	Bounds  []float64
	Counts  []float64
	Count   float64
	Sum     float64
	Present bool
	parts   []histogramPart
}

type histogramPart struct {
	key, incarnation string
	h                Histogram
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
	f, err := readFamilies(r)
	if err != nil {
		return Sample{}, err
	}
	running, waiting, kv := f.gauge(names.running...), f.gauge(names.waiting...), f.gauge(names.kvUsage...)
	s := Sample{
		Running:      running.sum,
		Waiting:      waiting.sum,
		KVUsage:      kv.mean,
		HitRate:      f.gauge(names.hitRate...).mean,
		Ranks:        f.cores(names.running, names.waiting, names.kvUsage),
		StartTime:    f.gauge("process_start_time_seconds").sum,
		TTFT:         f.histogram(names.ttft...),
		PromptTokens: f.counter(nil, names.promptTokens...),
		OutputTokens: f.counter(nil, names.outputTokens...),
		CachedTokens: f.counter(nil, names.cachedTokens...),
	}
	for _, q := range []struct {
		name string
		g    gaugeAgg
	}{{"running", running}, {"waiting", waiting}, {"kv_cache", kv}} {
		if !q.g.present {
			s.Missing = append(s.Missing, q.name)
		}
	}
	s.TBOT = f.histogram(names.tbotPerRequest...)
	s.PerRequestTBOT = s.TBOT.Present
	if !s.TBOT.Present {
		s.TBOT = f.histogram(names.tbotPerToken...)
	}
	s.Finished, s.Aborted, s.FinishedIncludesAborted = f.requests(names)
	return s, nil
}

// readFamilies parses a text exposition (0.0.4).
func readFamilies(r io.Reader) (families, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, &ParseError{err}
	}
	return families(mfs), nil
}

// gaugeAgg is a gauge summed and averaged over its series.
type gaugeAgg struct {
	sum, mean float64
	present   bool
}

// gauge sums (and averages) a gauge over its series; mean is -1 when the
// gauge is absent.
func (f families) gauge(names ...string) gaugeAgg {
	_, ss := f.series(names...)
	if len(ss) == 0 {
		return gaugeAgg{mean: -1}
	}
	g := gaugeAgg{present: true}
	for _, s := range ss {
		g.sum += finite(s.m.GetGauge().GetValue()) + finite(s.m.GetUntyped().GetValue())
	}
	g.mean = g.sum / float64(len(ss))
	return g
}

// counter sums a counter over its series, keeping each series' value for
// Diff; keep, when set, selects series.
func (f families) counter(keep func(*dto.Metric) bool, names ...string) Counter {
	fam, ss := f.series(names...)
	var c Counter
	for _, s := range ss {
		if keep != nil && !keep(s.m) {
			continue
		}
		v := finite(s.m.GetCounter().GetValue()) + finite(s.m.GetUntyped().GetValue())
		c.Value += v
		c.parts = append(c.parts, counterPart{key: s.key, incarnation: f.incarnation(fam, s), value: v})
	}
	c.Present = len(ss) > 0
	return c
}

func isAbort(m *dto.Metric) bool  { return label(m, "finished_reason", "") == "abort" }
func notAbort(m *dto.Metric) bool { return !isAbort(m) }

// requests splits the finished-requests counter into finished (served)
// and aborted ones; includes says finished counts aborted ones too.
func (f families) requests(n names) (finished, aborted Counter, includes bool) {
	finished = f.counter(notAbort, n.finished...)
	aborted = f.counter(isAbort, n.finished...)
	if ab := f.counter(nil, n.aborted...); ab.Present {
		// SGLang counts aborted requests apart, and in its total
		// (Sample.FinishedIncludesAborted): Diff subtracts them.
		return finished, ab, true
	}
	return finished, aborted, false
}

// histogram sums a histogram over its series, keeping each series for
// Diff; series with other bucket bounds than the first are skipped.
func (f families) histogram(names ...string) Histogram {
	fam, ss := f.series(names...)
	var h Histogram
	for _, s := range ss {
		mh := s.m.GetHistogram()
		bounds, counts := buckets(mh)
		p := Histogram{Bounds: bounds, Counts: counts, Present: true,
			Count: float64(mh.GetSampleCount()) + finite(mh.GetSampleCountFloat()), Sum: finite(mh.GetSampleSum())}
		if h.Present && !slices.Equal(bounds, h.Bounds) {
			continue
		}
		h.add(p)
		h.parts = append(h.parts, histogramPart{key: s.key, incarnation: f.incarnation(fam, s), h: p})
	}
	return h
}

// add adds p's observations to h (same bounds, or h empty).
func (h *Histogram) add(p Histogram) {
	if !h.Present {
		h.Bounds, h.Counts, h.Present = p.Bounds, slices.Clone(p.Counts), true
	} else {
		for i := range p.Counts {
			h.Counts[i] += p.Counts[i]
		}
	}
	h.Count += p.Count
	h.Sum += p.Sum
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
