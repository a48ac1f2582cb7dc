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
// golden-section search between the best grid point's neighbours. Every
// comparison is of exact sse (ttftLine); estimates stand in where they
// decide it (probe).
//
// With headroom above 1 it returns ErrNoHeadroom, before any exact fit,
// when the grid shows the result to lie below headroom × the largest load
// (pinned).
func (d *data) searchCapacity(factor, headroom float64) (float64, error) {
	sLo, sHi := math.Log(minHeadroom), math.Log(factor-1)
	step := (sHi - sLo) / (gridPoints - 1)
	d.grid = resize(d.grid, gridPoints)
	grid := d.grid
	for i := range grid {
		grid[i] = d.probe(sLo + float64(i)*step)
	}
	if headroom > 1 && d.pinned(grid, sLo, step, headroom) {
		return 0, fmt.Errorf("%w: the best fit lies below %g rps, %gx the largest load (%.3g rps)",
			ErrNoHeadroom, headroom*d.maxLoad, headroom, d.maxLoad)
	}
	best, bi := d.gridMin(grid)
	if bi == gridPoints-1 || math.IsInf(best, 1) || math.IsNaN(best) {
		return d.capacity(sHi), fmt.Errorf("%w: the best fit is at the search bound, %gx the largest load (%.3g rps)",
			ErrNoSaturation, factor, d.maxLoad)
	}
	p := d.golden(sLo+float64(max(bi-1, 0))*step, sLo+float64(bi+1)*step)
	s := p.s
	if d.exact(&p) > best { // golden section assumes one minimum in the bracket
		s = sLo + float64(bi)*step
	}
	c := d.capacity(s)
	if d.ttftLine(c).b == 0 {
		return c, fmt.Errorf("%w: TTFT does not rise with load up to %.3g rps", ErrNoSaturation, d.maxLoad)
	}
	return c, nil
}

func (d *data) capacity(s float64) float64 { return d.maxLoad * (1 + math.Exp(s)) }

// gridMin returns the smallest exact sse on the grid and its first index,
// as a scan of every point's exact sse would. Only the points whose
// estimate may reach the smallest estimate's upper bound can be it.
func (d *data) gridMin(grid []probe) (float64, int) {
	top := gridTop(grid)
	best, bi := math.Inf(1), 0
	for i := range grid {
		if p := &grid[i]; p.est-p.bound <= top || !(top < math.Inf(1)) {
			if v := d.exact(p); v < best {
				best, bi = v, i
			}
		}
	}
	return best, bi
}

// gridTop is the smallest upper bound of the grid's estimates: a point
// whose estimate's lower bound lies above it cannot be the grid's best.
func gridTop(grid []probe) float64 {
	top := math.Inf(1)
	for _, p := range grid {
		top = min(top, p.est+p.bound)
	}
	return top
}

// pinnedMargin is the relative margin by which pinned keeps its answer
// certain: the search's points may pass the bracket's end by the rounding
// of a+r·(b−a), and math.Exp is within an ulp, not monotone by proof.
const pinnedMargin = 1e-9

// pinned reports whether the capacity searchCapacity would return is
// certainly below headroom × the largest load. The grid's best point bi
// is one of gridMin's candidates (the points whose estimate may reach the
// smallest upper bound), and the result lies between bi's neighbours (the
// golden section) or at bi, so it is at most the capacity of the point
// after the last candidate; capacity rises with s.
func (d *data) pinned(grid []probe, sLo, step, headroom float64) bool {
	top := gridTop(grid)
	if !(top < math.Inf(1)) {
		return false // every point is a candidate
	}
	last := 0
	for i := range grid {
		if p := &grid[i]; p.est-p.bound <= top {
			last = i
		}
	}
	if last+1 >= len(grid) {
		return false
	}
	return d.capacity(sLo+float64(last+1)*step)*(1+pinnedMargin) < headroom*d.maxLoad
}

// golden minimises the sse on [a, b] by golden-section search.
func (d *data) golden(a, b float64) probe {
	const r = 0.6180339887498949 // (sqrt(5)-1)/2
	p1, p2 := d.probe(b-r*(b-a)), d.probe(a+r*(b-a))
	for range goldenRounds {
		pa, pb, x1, x2 := a, b, p1.s, p2.s
		if d.atMost(&p1, &p2) {
			b, p2 = p2.s, p1
			p1 = d.probe(b - r*(b-a))
		} else {
			a, p1 = p1.s, p2
			p2 = d.probe(a + r*(b-a))
		}
		if a == pa && b == pb && p1.s == x1 && p2.s == x2 {
			break // the bracket is down to rounding: every further round repeats this one
		}
	}
	if d.atMost(&p1, &p2) {
		return p1
	}
	return p2
}
