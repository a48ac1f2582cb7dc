package optimize

import (
	"math"
	"slices"
)

// move finds the best level for a free tree relative to its current
// prices, within the reach of the bid lists.
func (x *ties) move(members []int32, tol, room float64) (moveResult, bool) {
	if up, d := x.slopeCurv(members, 0, true, true); up > tol {
		return x.moveUp(members, tol, room, up, d), true
	}
	if dn, d := x.slopeCurv(members, 0, false, true); dn < -tol {
		return x.moveDown(members, tol, room, dn, d), true
	}
	return moveResult{}, false
}

// guess predicts which kink a move stops at, from the slope s0 and
// curvature d0 at its start: the slope falls by d0 per ms and jumps at
// each kink (down by the load of an engine the tree takes, at the price
// there, or by the demand of a cluster reaching the shed penalty; up,
// going down, by the load of an engine it gives up).
func (x *ties) guess(s0, d0 float64, up bool) int {
	m := x.m
	jumps := 0.0
	for i, k := range x.kinks {
		switch {
		case k.i >= 0:
			ce := &x.cand[k.i]
			if f := &m.eng[ce.e]; ce.o > f.a {
				jumps += f.loadAtPriceFrom(ce.o, ce.l)
			}
		case k.i < -1:
			jumps += m.demand[-k.i-2]
		default:
			return i
		}
		lin := s0 - d0*k.t
		if (up && lin-jumps < 0) || (!up && lin+jumps > 0) {
			return i
		}
	}
	return len(x.kinks)
}

func (x *ties) sortKinks(desc bool) {
	slices.SortFunc(x.kinks, func(a, b kink) int {
		c := cmpFloat(a.t, b.t)
		if desc {
			c = -c
		}
		if c != 0 {
			return c
		}
		return int(a.i - b.i)
	})
}

func (x *ties) moveUp(members []int32, tol, room, s0, d0 float64) moveResult {
	m := x.m
	x.kinks = x.kinks[:0]
	for i, ce := range x.cand {
		if ce.b < ce.o && ce.o-ce.b < room {
			x.kinks = append(x.kinks, kink{t: ce.o - ce.b, i: int32(i)})
		}
	}
	for _, c := range members {
		if x.pi[c] <= m.penalty && m.penalty-x.pi[c] < room {
			x.kinks = append(x.kinks, kink{t: m.penalty - x.pi[c], i: -c - 2})
		}
	}
	x.kinks = append(x.kinks, kink{t: room, i: -1})
	x.sortKinks(false)
	// A tree stops where one of its clusters reaches the shed penalty
	// (it ties to the ground there: moving on would price the cluster
	// above the penalty), and where the lists end.
	for i, k := range x.kinks {
		if k.i < 0 {
			x.kinks = x.kinks[:i+1]
			break
		}
	}
	g := x.guess(s0, d0, true)
	if g == 0 {
		// The slope's tangent says the level is before the first kink:
		// try that first, as most moves of a big tree are small ones.
		if r, ok := x.newtonIn(members, s0, d0, x.kinks[0].t, tol); ok {
			return moveResult{t: r, kinkAt: -1}
		}
	}
	j := gallop(g, len(x.kinks), func(i int) bool {
		k := x.kinks[i]
		return k.i < 0 || x.slope(members, k.t, true) < 0
	})
	lo := 0.0
	if j > 0 {
		lo = x.kinks[j-1].t
	}
	k := x.kinks[j]
	if below := x.slope(members, k.t, false); below > tol {
		return moveResult{t: k.t, kinkAt: k.i}
	}
	return moveResult{t: x.root(members, lo, k.t, tol), kinkAt: -1}
}

func (x *ties) moveDown(members []int32, tol, room, s0, d0 float64) moveResult {
	x.kinks = x.kinks[:0]
	for i, ce := range x.cand {
		if ce.b > ce.o && ce.b-ce.o < room {
			x.kinks = append(x.kinks, kink{t: ce.o - ce.b, i: int32(i)})
		}
	}
	x.kinks = append(x.kinks, kink{t: -room, i: -1})
	x.sortKinks(true)
	g := x.guess(s0, d0, false)
	if g == 0 {
		if r, ok := x.newtonIn(members, s0, d0, x.kinks[0].t, tol); ok {
			return moveResult{t: r, kinkAt: -1}
		}
	}
	j := gallop(g, len(x.kinks), func(i int) bool {
		k := x.kinks[i]
		return k.i == -1 || x.slope(members, k.t, false) > 0
	})
	hi := 0.0
	if j > 0 {
		hi = x.kinks[j-1].t
	}
	k := x.kinks[j]
	if above := x.slope(members, k.t, true); above < -tol {
		return moveResult{t: k.t, kinkAt: k.i}
	}
	return moveResult{t: x.root(members, k.t, hi, tol), kinkAt: -1}
}

// gallop returns the first i in [0, n) for which pass holds, pass being
// false then true (n if never true). It probes outwards from a guess g
// (doubling its steps) before a binary search, so that a good guess costs
// two or three probes: each probe is a pass over the moving tree's
// engines.
func gallop(g, n int, pass func(i int) bool) int {
	g = min(max(g, 0), n)
	lo, hi := g, n // answer in [lo, hi]
	if g == n || pass(g) {
		hi, lo = g, 0
		for step := 1; ; step *= 2 {
			j := hi - step
			if j < 0 {
				break
			}
			if !pass(j) {
				lo = j + 1
				break
			}
			hi = j
		}
	} else {
		lo = g + 1
		for step := 1; lo < n; step *= 2 {
			j := min(lo+step-1, n-1)
			if pass(j) {
				hi = j
				break
			}
			lo = j + 1
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if pass(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// root solves slope(t) = 0 for t in (lo, hi), where no kink lies and the
// slope falls from positive to negative, by Newton's method safeguarded
// with bisection.
func (x *ties) root(members []int32, lo, hi, tol float64) float64 {
	r, _ := x.rootOK(members, lo, hi, tol)
	return r
}

// newtonIn runs Newton's method on the slope from the tree's level (where
// it is s0, falling at d0 per ms) toward limit, the first kink, and
// reports the root when it finds one strictly before the kink in a few
// steps; otherwise the caller searches the kinks.
func (x *ties) newtonIn(members []int32, s0, d0, limit, tol float64) (float64, bool) {
	t, g, d := 0.0, s0, d0
	for range 8 {
		if !(d > 0) {
			return 0, false
		}
		next := t + g/d
		if (limit > 0 && !(next < limit)) || (limit < 0 && !(next > limit)) {
			return 0, false
		}
		t = next
		g, d = x.slopeCurv(members, t, limit > 0, true)
		if math.Abs(g) <= tol {
			return t, true
		}
	}
	return 0, false
}

// rootOK is root, reporting whether the slope came within tol of zero
// (it does not when the bracket holds no root).
func (x *ties) rootOK(members []int32, lo, hi, tol float64) (float64, bool) {
	for step := 1.0; math.IsInf(hi, 1); step *= 2 {
		if x.slope(members, lo+step, true) < 0 {
			hi = lo + step
		} else {
			lo += step
		}
	}
	for step := 1.0; math.IsInf(lo, -1); step *= 2 {
		if x.slope(members, hi-step, false) > 0 {
			lo = hi - step
		} else {
			hi -= step
		}
	}
	t := lo + (hi-lo)/2
	if lo == 0 || hi == 0 { // start from the current level
		t = 0
	}
	for range 200 {
		g, d := x.slopeCurv(members, t, true, true)
		if math.Abs(g) <= tol {
			return t, true
		}
		if g > 0 {
			lo = t
		} else {
			hi = t
		}
		next := t + g/d
		if !(d > 0) || !(next > lo && next < hi) {
			next = lo + (hi-lo)/2
		}
		if next == t || hi-lo <= 1e-15*max(1, math.Abs(t)) {
			return t, math.Abs(g) <= 1e3*tol
		}
		t = next
	}
	return t, false
}
