package window

import "math"

// Sketch constants. A value x lands in bucket i = ceil(log_gamma(x)), that
// is gamma^(i-1) < x <= gamma^i, and is read back as 2*gamma^i/(gamma+1),
// which is within SketchRelativeAccuracy of every x in the bucket. The
// range covers latencies from 10 µs to 10 min in 896 buckets.
const (
	SketchRelativeAccuracy = 0.01
	SketchMinMs            = 0.01    // smaller values (and zero) count as 0
	SketchMaxMs            = 600_000 // larger values count as SketchMaxMs
)

var (
	sketchGamma       = (1 + SketchRelativeAccuracy) / (1 - SketchRelativeAccuracy)
	sketchInvLogGamma = 1 / math.Log(sketchGamma)
	sketchMinIndex    = int(math.Ceil(math.Log(SketchMinMs) * sketchInvLogGamma))
	sketchBuckets     = int(math.Ceil(math.Log(SketchMaxMs)*sketchInvLogGamma)) - sketchMinIndex + 1
)

// growSlack is how many buckets a store grows by beyond what one value
// needs, so that a spreading distribution does not reallocate every time.
const growSlack = 32

// Sketch is a DDSketch-style quantile sketch of latencies in milliseconds:
// log-spaced buckets with a relative error of at most
// SketchRelativeAccuracy on every quantile of values in
// [SketchMinMs, SketchMaxMs]. Memory is at most one uint32 per bucket of the
// fixed range (3.5 KiB), and in practice one per bucket between the
// smallest and largest value seen. Bucket counts are 32-bit and saturate
// (a window would need 4e9 values in one bucket). Sketches merge exactly (bucket counts add).
//
// The zero value is an empty sketch ready to use. Reset empties it and
// keeps its memory, so a reused sketch does not allocate.
type Sketch struct {
	counts []uint32 // counts[i] is bucket off+i (relative to sketchMinIndex)
	off    int
	// nz and end bound the buckets with counts: counts[:nz] and
	// counts[end:] are all 0 (nz >= end: every one). A store keeps its
	// width through Reset, and a window's cell holds a few values in a
	// store of a hundred buckets or more, so the quantiles' scan, Merge
	// and Reset visit only counts[nz:end].
	nz, end int
	zeros   uint64 // values below SketchMinMs
	n       uint64
	sum     float64
	min     float64
	max     float64
}

// Add records one value. NaN is ignored and reported with false; negative
// values count as 0 and +Inf as SketchMaxMs.
func (s *Sketch) Add(ms float64) bool {
	x := prepare(ms)
	s.addSample(x)
	return x.ok
}

// sample is a value with its bucket worked out, so that one value added to
// several sketches costs one logarithm.
type sample struct {
	ms float64
	b  int // bucket, or -1 below SketchMinMs
	ok bool
}

func prepare(ms float64) sample {
	switch {
	case ms != ms:
		return sample{}
	case ms < SketchMinMs:
		return sample{ms: ms, b: -1, ok: true}
	}
	return sample{ms: ms, b: bucketOf(ms), ok: true}
}

func (s *Sketch) addSample(x sample) {
	if !x.ok {
		return
	}
	if s.n == 0 || x.ms < s.min {
		s.min = x.ms
	}
	if s.n == 0 || x.ms > s.max {
		s.max = x.ms
	}
	s.n++
	if x.b < 0 {
		s.zeros++
		return
	}
	s.sum += min(x.ms, SketchMaxMs)
	s.addBucket(x.b, 1)
}

// bucketOf returns the bucket of a value in [SketchMinMs, +Inf].
func bucketOf(ms float64) int {
	if ms >= SketchMaxMs {
		return sketchBuckets - 1
	}
	i := int(math.Ceil(math.Log(ms)*sketchInvLogGamma)) - sketchMinIndex
	return min(max(i, 0), sketchBuckets-1)
}

func (s *Sketch) addBucket(b int, c uint32) {
	i := b - s.off
	if i < 0 || i >= len(s.counts) {
		s.grow(b)
		i = b - s.off
	}
	s.nz, s.end = min(s.nz, i), max(s.end, i+1)
	if v := s.counts[i] + c; v >= c {
		s.counts[i] = v
	} else {
		s.counts[i] = math.MaxUint32
	}
}

// grow widens the store to cover bucket b, reusing its array when it can.
func (s *Sketch) grow(b int) {
	if len(s.counts) == 0 {
		lo := max(b-growSlack/2, 0)
		hi := min(b+growSlack/2, sketchBuckets-1)
		s.off = lo
		s.counts = growTo(s.counts, hi-lo+1)
		s.nz, s.end = len(s.counts), 0
		return
	}
	lo, hi := s.off, s.off+len(s.counts)-1
	if b < lo {
		lo = max(b-growSlack, 0)
	} else {
		hi = min(b+growSlack, sketchBuckets-1)
	}
	shift := s.off - lo
	old := len(s.counts)
	s.counts = growTo(s.counts, hi-lo+1)
	if shift > 0 {
		copy(s.counts[shift:shift+old], s.counts[:old])
		clear(s.counts[:shift])
		s.nz, s.end = s.nz+shift, s.end+shift
	}
	s.off = lo
}

// growTo returns c resized to n (n >= len(c)), new cells zeroed, reusing
// the backing array when its capacity allows.
func growTo(c []uint32, n int) []uint32 {
	if n <= cap(c) {
		old := len(c)
		c = c[:n]
		clear(c[old:])
		return c
	}
	nc := make([]uint32, n, max(n, min(2*cap(c), sketchBuckets)))
	copy(nc, c)
	return nc
}

// Reset empties the sketch and keeps its memory.
func (s *Sketch) Reset() {
	if s.nz < s.end {
		clear(s.counts[s.nz:s.end])
	}
	s.nz, s.end = len(s.counts), 0
	s.zeros, s.n, s.sum, s.min, s.max = 0, 0, 0, 0, 0
}

// Count returns the number of values added.
func (s *Sketch) Count() uint64 { return s.n }

// Mean returns the mean of the values added (values outside the range
// clamped as in Add), or 0 for an empty sketch.
func (s *Sketch) Mean() float64 {
	if s.n == 0 {
		return 0
	}
	return s.sum / float64(s.n)
}

// Quantile returns an estimate of the q-quantile (0 <= q <= 1), defined as
// the value of rank floor(q*(n-1)) in sorted order, within
// SketchRelativeAccuracy of it when it lies in the sketch's range. It
// returns 0 for an empty sketch or a q outside [0, 1].
func (s *Sketch) Quantile(q float64) float64 {
	if s.n == 0 || !(q >= 0 && q <= 1) {
		return 0
	}
	rank := uint64(q * float64(s.n-1))
	if rank < s.zeros {
		return max(s.min, 0)
	}
	seen := s.zeros
	for i, c := range s.counts {
		seen += uint64(c)
		if seen > rank {
			return s.bucketValue(i)
		}
	}
	return s.max
}

// bucketValue is Quantile's estimate for a rank in bucket off+i.
func (s *Sketch) bucketValue(i int) float64 {
	return min(max(min(sketchValues[s.off+i], SketchMaxMs), s.min), s.max)
}

// sketchValues holds every bucket's value, 2γ^b/(γ+1) for bucket b,
// computed once (math.Pow per quantile was a tenth of the feature rows'
// cost in a pid backtest run).
var sketchValues = func() []float64 {
	v := make([]float64, sketchBuckets)
	for b := range v {
		v[b] = 2 * math.Pow(sketchGamma, float64(b+sketchMinIndex)) / (sketchGamma + 1)
	}
	return v
}()

// Quantiles3 returns Quantile(q1), Quantile(q2) and Quantile(q3), the
// same values, in one pass over the buckets when q1 <= q2 <= q3: a
// feature row takes three quantiles of each sketch, and scanning the
// buckets from the start for each was most of a row's cost.
func (s *Sketch) Quantiles3(q1, q2, q3 float64) (float64, float64, float64) {
	i, seen, last := s.nz, s.zeros, uint64(0) // seen: zeros + Σ counts[:i] (counts[:nz] are 0)
	var out [3]float64
	for k, q := range [3]float64{q1, q2, q3} {
		if s.n == 0 || !(q >= 0 && q <= 1) {
			continue // 0
		}
		rank := uint64(q * float64(s.n-1))
		if rank < s.zeros {
			out[k] = max(s.min, 0)
			continue
		}
		if rank < last { // out of order: scan from the start
			i, seen = s.nz, s.zeros
		}
		last = rank
		for i+4 <= s.end { // four buckets a step while all are at or below rank
			c := s.counts[i : i+4 : i+4]
			n4 := uint64(c[0]) + uint64(c[1]) + uint64(c[2]) + uint64(c[3])
			if seen+n4 > rank {
				break
			}
			seen += n4
			i += 4
		}
		for i < s.end && seen+uint64(s.counts[i]) <= rank {
			seen += uint64(s.counts[i])
			i++
		}
		if i >= s.end { // past every count (counts[end:] are 0)
			out[k] = s.max
		} else {
			out[k] = s.bucketValue(i)
		}
	}
	return out[0], out[1], out[2]
}

// Merge adds every value of o to s, as if they had been added to s.
func (s *Sketch) Merge(o *Sketch) {
	if o.n == 0 {
		return
	}
	if s.n == 0 || o.min < s.min {
		s.min = o.min
	}
	if s.n == 0 || o.max > s.max {
		s.max = o.max
	}
	s.n += o.n
	s.zeros += o.zeros
	s.sum += o.sum
	if o.n == o.zeros {
		return // every value below SketchMinMs: no bucket counts
	}
	// Only o.counts[nz:end] can hold counts: a window's cell holds a few
	// values in a store of a hundred buckets or more, so this skips most
	// of the scan.
	for i := o.nz; i < o.end; i++ {
		if c := o.counts[i]; c != 0 {
			s.addBucket(o.off+i, c)
		}
	}
}
