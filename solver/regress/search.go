package regress

import (
	"fmt"
	"math"
)

// The capacity search works on s = ln(c/maxLoad - 1), so that capacities
// just above the largest load (an engine driven into saturation) and far
// above it are resolved alike: c = maxLoad*(1+e^s).
const (
	gridPoints   = 256
	minHeadroom  = 1e-9 // smallest (c - maxLoad)/maxLoad searched
	goldenRounds = 80   // shrinks the bracket by 0.618^80, far below float precision
)

// searchCapacity returns the capacity that minimises the TTFT residuals
// (the profile likelihood of c under Gaussian noise): a grid over s, then a
// golden-section search between the best grid point's neighbours.
func (d *data) searchCapacity(factor float64) (float64, error) {
	sLo, sHi := math.Log(minHeadroom), math.Log(factor-1)
	capacity := func(s float64) float64 { return d.maxLoad * (1 + math.Exp(s)) }
	sse := func(s float64) float64 { return d.ttftLine(capacity(s)).sse }
	step := (sHi - sLo) / (gridPoints - 1)
	best, bi := math.Inf(1), 0
	for i := range gridPoints {
		if v := sse(sLo + float64(i)*step); v < best {
			best, bi = v, i
		}
	}
	if bi == gridPoints-1 || math.IsInf(best, 1) || math.IsNaN(best) {
		return capacity(sHi), fmt.Errorf("%w: the best fit is at the search bound, %gx the largest load (%.3g rps)",
			ErrNoSaturation, factor, d.maxLoad)
	}
	s := golden(sse, sLo+float64(max(bi-1, 0))*step, sLo+float64(bi+1)*step)
	if sse(s) > best { // golden section assumes one minimum in the bracket
		s = sLo + float64(bi)*step
	}
	c := capacity(s)
	if d.ttftLine(c).b == 0 {
		return c, fmt.Errorf("%w: TTFT does not rise with load up to %.3g rps", ErrNoSaturation, d.maxLoad)
	}
	return c, nil
}

// golden minimises f on [a, b] by golden-section search.
func golden(f func(float64) float64, a, b float64) float64 {
	const r = 0.6180339887498949 // (sqrt(5)-1)/2
	x1, x2 := b-r*(b-a), a+r*(b-a)
	f1, f2 := f(x1), f(x2)
	for range goldenRounds {
		pa, pb, p1, p2 := a, b, x1, x2
		if f1 <= f2 {
			b, x2, f2 = x2, x1, f1
			x1 = b - r*(b-a)
			f1 = f(x1)
		} else {
			a, x1, f1 = x1, x2, f2
			x2 = a + r*(b-a)
			f2 = f(x2)
		}
		if a == pa && b == pb && x1 == p1 && x2 == p2 {
			break // the bracket is down to rounding: every further round repeats this one
		}
	}
	if f1 <= f2 {
		return x1
	}
	return x2
}
