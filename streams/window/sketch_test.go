package window

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var testQuantiles = []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1}

// exactQuantile uses the sketch's rank convention: rank floor(q*(n-1)).
func exactQuantile(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}

func TestSketchRelativeError(t *testing.T) {
	dists := []struct {
		name string
		draw func(r *rand.Rand) float64
	}{
		// TTFT-like: median 200 ms, long right tail.
		{"lognormal(ln200,1)", func(r *rand.Rand) float64 { return math.Exp(math.Log(200) + r.NormFloat64()) }},
		// TBOT-like: median 30 ms, narrow.
		{"lognormal(ln30,0.3)", func(r *rand.Rand) float64 { return math.Exp(math.Log(30) + 0.3*r.NormFloat64()) }},
		// The whole range, log-uniform.
		{"loguniform(range)", func(r *rand.Rand) float64 {
			return math.Exp(math.Log(SketchMinMs) + r.Float64()*math.Log(SketchMaxMs/SketchMinMs))
		}},
	}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var s Sketch
			vals := make([]float64, 100_000)
			for i := range vals {
				vals[i] = d.draw(r)
				s.Add(vals[i])
			}
			slices.Sort(vals)
			worst := 0.0
			for _, q := range testQuantiles {
				want, got := exactQuantile(vals, q), s.Quantile(q)
				rel := math.Abs(got-want) / want
				worst = max(worst, rel)
				if rel > SketchRelativeAccuracy+1e-9 {
					t.Errorf("q=%v: got %v, exact %v, relative error %.4f > %v", q, got, want, rel, SketchRelativeAccuracy)
				}
			}
			t.Logf("worst relative error %.5f over %d quantiles", worst, len(testQuantiles))
			if got := s.Count(); got != uint64(len(vals)) {
				t.Errorf("Count = %d, want %d", got, len(vals))
			}
		})
	}
}

func TestSketchMean(t *testing.T) {
	var s Sketch
	for _, v := range []float64{10, 20, 30, 40} {
		s.Add(v)
	}
	if got := s.Mean(); got != 25 {
		t.Errorf("Mean = %v, want 25", got)
	}
}

func TestSketchMergeEqualsSingle(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var all, a, b, c Sketch
	parts := []*Sketch{&a, &b, &c}
	for i := range 30_000 {
		v := math.Exp(math.Log(100) + 1.5*r.NormFloat64())
		if i%97 == 0 {
			v = 0 // some zeros too
		}
		all.Add(v)
		// Skew the parts so that their bucket ranges differ.
		parts[min(int(v/150), 2)].Add(v)
	}
	var m Sketch
	m.Merge(&c)
	m.Merge(&a)
	m.Merge(&b)
	if m.Count() != all.Count() || m.zeros != all.zeros || m.min != all.min || m.max != all.max {
		t.Fatalf("merged count/zeros/min/max %d/%d/%v/%v, single %d/%d/%v/%v",
			m.Count(), m.zeros, m.min, m.max, all.Count(), all.zeros, all.min, all.max)
	}
	if math.Abs(m.Mean()-all.Mean()) > 1e-9*all.Mean() {
		t.Errorf("merged mean %v, single %v", m.Mean(), all.Mean())
	}
	for b := range sketchBuckets {
		if got, want := bucketCount(&m, b), bucketCount(&all, b); got != want {
			t.Fatalf("bucket %d: merged %d, single %d", b, got, want)
		}
	}
	for _, q := range testQuantiles {
		if got, want := m.Quantile(q), all.Quantile(q); got != want {
			t.Errorf("q=%v: merged %v, single %v", q, got, want)
		}
	}
	var empty Sketch
	m.Merge(&empty)
	if m.Count() != all.Count() {
		t.Errorf("merging an empty sketch changed the count")
	}
}

func TestSketchCountsSaturate(t *testing.T) {
	var a, b Sketch
	a.Add(100)
	b.Add(100)
	b.counts[bucketOf(100)-b.off] = math.MaxUint32
	a.Merge(&b)
	if got := bucketCount(&a, bucketOf(100)); got != math.MaxUint32 {
		t.Errorf("merged bucket = %d, want saturated at %d", got, uint32(math.MaxUint32))
	}
}

func bucketCount(s *Sketch, b int) uint32 {
	if i := b - s.off; i >= 0 && i < len(s.counts) {
		return s.counts[i]
	}
	return 0
}

func TestSketchEdges(t *testing.T) {
	var s Sketch
	if got := s.Quantile(0.5); got != 0 {
		t.Errorf("empty sketch p50 = %v, want 0", got)
	}
	if s.Add(math.NaN()) {
		t.Errorf("Add(NaN) = true, want false")
	}
	if s.Count() != 0 {
		t.Errorf("NaN was counted")
	}
	s.Add(-5)
	s.Add(0)
	s.Add(1e-9)
	if got := s.Quantile(1); got > SketchMinMs {
		t.Errorf("values below range: max quantile %v, want <= %v", got, SketchMinMs)
	}
	s.Add(math.Inf(1))
	s.Add(5e6)
	if got := s.Quantile(1); got != SketchMaxMs {
		t.Errorf("max quantile = %v, want %v (values above the range count as its top)", got, float64(SketchMaxMs))
	}
	if got := s.Quantile(0.8); math.Abs(got-SketchMaxMs)/SketchMaxMs > SketchRelativeAccuracy {
		t.Errorf("values above range read back as %v, want about %v", got, SketchMaxMs)
	}
	for _, q := range []float64{-0.1, 1.1, math.NaN()} {
		if got := s.Quantile(q); got != 0 {
			t.Errorf("Quantile(%v) = %v, want 0", q, got)
		}
	}
	s.Reset()
	if s.Count() != 0 || s.Quantile(0.5) != 0 || s.Mean() != 0 {
		t.Errorf("Reset left count %d", s.Count())
	}
}

func TestSketchMemoryBoundedAndReused(t *testing.T) {
	var s Sketch
	for v := SketchMinMs; v < 2*SketchMaxMs; v *= 1.001 {
		s.Add(v)
	}
	if len(s.counts) > sketchBuckets || cap(s.counts) > sketchBuckets {
		t.Errorf("store grew to len %d cap %d, bound %d", len(s.counts), cap(s.counts), sketchBuckets)
	}
	if sketchBuckets > 1000 {
		t.Errorf("%d buckets; the fixed range should need about 900", sketchBuckets)
	}
	r := rand.New(rand.NewPCG(5, 6))
	vals := make([]float64, 1000)
	for i := range vals {
		vals[i] = math.Exp(math.Log(200) + r.NormFloat64())
	}
	allocs := testing.AllocsPerRun(20, func() {
		s.Reset()
		for _, v := range vals {
			s.Add(v)
		}
	})
	if allocs != 0 {
		t.Errorf("refilling a reset sketch allocated %.1f times", allocs)
	}
}

func BenchmarkSketchAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	vals := make([]float64, 4096)
	for i := range vals {
		vals[i] = math.Exp(math.Log(200) + r.NormFloat64())
	}
	var s Sketch
	b.ReportAllocs()
	cpu0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		s.Add(vals[i&4095])
	}
	reportRates(b, cpu0, "values")
}

// TestSketchMergeEdges merges sketches holding values at the ends of the
// range (negative, zero, below SketchMinMs, exactly it, SketchMaxMs and
// past it, +Inf) and single values, each into one sketch, and compares
// every bucket with adding them all to one sketch: Merge reads only the
// buckets between its source's smallest and largest values.
func TestSketchMergeEdges(t *testing.T) {
	vals := [][]float64{{-5}, {0, 0.001}, {SketchMinMs}, {SketchMinMs, 3}, {42}, {SketchMaxMs}, {1e9, math.Inf(1)},
		{0.5, 7, 7, 900}, {-1, 250}, {}}
	var all, m Sketch
	for _, vs := range vals {
		var part Sketch
		for _, v := range vs {
			part.Add(v)
			all.Add(v)
		}
		m.Merge(&part)
	}
	if m.Count() != all.Count() || m.zeros != all.zeros || m.min != all.min || m.max != all.max {
		t.Fatalf("merged count/zeros/min/max %d/%d/%v/%v, single %d/%d/%v/%v",
			m.Count(), m.zeros, m.min, m.max, all.Count(), all.zeros, all.min, all.max)
	}
	for b := range sketchBuckets {
		if got, want := bucketCount(&m, b), bucketCount(&all, b); got != want {
			t.Fatalf("bucket %d: merged %d, single %d", b, got, want)
		}
	}
}
