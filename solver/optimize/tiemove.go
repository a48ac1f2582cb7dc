package optimize

import (
	"fmt"
	"math"
	"slices"
)

// moveEngine is an engine a moving tree bids for: its best bid from the
// tree (b, by cluster c) and from every other tree (o, by cluster oc).
type moveEngine struct {
	e, c, oc int32
	b, o     float64
	l        float64 // load at the last shift evaluated (lt): the next one's start
	lt       float64
}

// kink is a point on a tree's move where the slope of the dual jumps: an
// engine changes hands (i ≥ 0, index into cand), a cluster reaches the
// shed penalty (i < -1: cluster −i−2), or the bid lists run out (i = -1).
type kink struct {
	t float64
	i int32
}

// moveResult is where a move ended: the shift t, and at a kink what to
// tie (see kink.i; -1: nothing, the move ended where the slope is zero or
// where the bid lists stop).
type moveResult struct {
	t      float64
	kinkAt int32
}

// candidates gathers the engines the members (marked in inS) bid for
// within the bid lists, with the best bid from inside and from outside.
func (x *ties) candidates(members []int32) {
	x.cand = x.cand[:0]
	x.stampN++
	for _, c := range members {
		for _, eng := range x.bids.cluster(c) {
			if x.stamp[eng] == x.stampN {
				continue
			}
			x.stamp[eng] = x.stampN
			x.cand = append(x.cand, x.bidsFor(eng))
		}
	}
}

// candidatesFull is candidates over every arc, for a move that may go
// further than the bid lists reach.
func (x *ties) candidatesFull(members []int32) {
	m := x.m
	x.cand = x.cand[:0]
	x.stampN++
	for _, c := range members {
		lo, hi := m.arcs(int(c))
		for a := lo; a < hi; a++ {
			e := m.arcEng[a]
			if x.stamp[e] == x.stampN {
				continue
			}
			x.stamp[e] = x.stampN
			me := moveEngine{e: e, c: -1, oc: -1, b: math.Inf(-1), o: math.Inf(-1), l: x.load[e]}
			for k := m.eStart[e]; k < m.eStart[e+1]; k++ {
				c := m.slotClu[k]
				if !x.active(int(c)) {
					continue
				}
				v := x.pi[c] - m.slotNet[k]
				if x.inS[c] {
					if v > me.b {
						me.b, me.c = v, c
					}
				} else if v > me.o {
					me.o, me.oc = v, c
				}
			}
			if math.Abs(me.b-me.o) <= tieTol*max(1, math.Abs(me.b)) {
				me.o = me.b
			}
			x.cand = append(x.cand, me)
		}
	}
}

// bidsFor is engine e's best bids from the moving tree and from others.
func (x *ties) bidsFor(e int32) moveEngine {
	m := x.m
	me := moveEngine{e: e, c: -1, oc: -1, b: math.Inf(-1), o: math.Inf(-1), l: x.load[e]}
	for _, k := range x.bids.engine(e) {
		c := m.slotClu[k]
		v := x.pi[c] - m.slotNet[k]
		if x.inS[c] {
			if v > me.b {
				me.b, me.c = v, c
			}
		} else if v > me.o {
			me.o, me.oc = v, c
		}
	}
	if math.Abs(me.b-me.o) <= tieTol*max(1, math.Abs(me.b)) {
		me.o = me.b // tied to rounding: the kink is here
	}
	return me
}

// slope is the dual's derivative along a move of the tree by t, just
// above t (up) or just below it: the tree's unshed demand less the load
// of the engines it owns there.
func (x *ties) slope(members []int32, t float64, up bool) float64 {
	s, _ := x.slopeCurv(members, t, up, false)
	return s
}

// slopeCurv is slope and, with curv, minus its derivative: Σ Λ'(bid) over
// the engines the tree owns at t.
func (x *ties) slopeCurv(members []int32, t float64, up, curv bool) (s, d float64) {
	m := x.m
	x.evals++
	x.evalEng += len(x.cand)
	for _, c := range members {
		p := x.pi[c] + t
		if p < m.penalty || (p == m.penalty && !up) {
			s += m.demand[c]
		}
	}
	for i := range x.cand {
		ce := &x.cand[i]
		v := ce.b + t
		if !(v > ce.o || (v == ce.o && up)) {
			continue
		}
		f := &m.eng[ce.e]
		if v <= f.a {
			continue
		}
		l := f.loadAtPriceFrom(v, ce.l)
		ce.l, ce.lt = l, t
		s -= l
		if curv && l < f.u {
			_, d2 := f.marginal(l)
			d += 1 / d2
		}
	}
	return s, d
}

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

// stationaryKink: a tree whose slope is positive below and negative
// above its level sits on a kink it must tie at.
func (x *ties) stationaryKink(members []int32, tol float64) *moveResult {
	m := x.m
	if x.slope(members, 0, false) <= tol || x.slope(members, 0, true) >= -tol {
		return nil
	}
	best, at := 0.0, int32(-1)
	for i, ce := range x.cand {
		if ce.b == ce.o && ce.b > m.eng[ce.e].a {
			if l := m.eng[ce.e].loadAtPriceFrom(ce.b, x.load[ce.e]); l > best {
				best, at = l, int32(i)
			}
		}
	}
	if at >= 0 {
		return &moveResult{t: 0, kinkAt: at}
	}
	for _, c := range members {
		if x.pi[c] == m.penalty {
			return &moveResult{t: 0, kinkAt: -c - 2}
		}
	}
	return nil
}

// apply moves the tree by r.t, ties it at its kink, and updates the
// owners of the engines it bids for, queueing every tree whose balance
// changed.
func (x *ties) apply(k int32, members []int32, r moveResult) {
	x.moves++
	if x.trace != nil {
		desc := ""
		if r.kinkAt >= 0 {
			ce := x.cand[r.kinkAt]
			desc = fmt.Sprintf("tie e%d c%d(b %.9g) oc%d(o %.9g)", ce.e, ce.c, ce.b, ce.oc, ce.o)
		}
		x.trace("move %d: comp %d %v by %.9g kink %d %s", x.moves, k, members, r.t, r.kinkAt, desc)
	}
	for _, c := range members {
		x.pi[c] += r.t
	}
	structural := false
	switch {
	case r.kinkAt >= 0:
		ce := x.cand[r.kinkAt]
		x.merges++
		for _, c := range []int32{ce.c, ce.oc} {
			if !x.tied(c, ce.e) {
				x.addArc(tieArc{c, ce.e, x.net(c, ce.e)})
			}
		}
		structural = true
	case r.kinkAt < -1:
		x.merges++
		x.addArc(tieArc{-r.kinkAt - 2, -1, 0})
		structural = true
	default:
		x.enqueue(k) // the lists ended the move, or the level is now right
	}
	if structural {
		x.components()
		x.snap()
		x.enqueue(k)
	}
	x.changed = x.changed[:0]
	for i := range x.cand {
		ce := &x.cand[i]
		before, beforeTies := x.owner[ce.e], x.ties[ce.e]
		if beforeTies > 0 {
			x.disown(ce.e)
			x.ownEngine(ce.e)
		} else if !x.reown1(ce, r.t) {
			continue
		}
		if x.owner[ce.e] != before || x.ties[ce.e] != beforeTies {
			x.changed = append(x.changed, before, x.owner[ce.e])
		}
		if x.ties[ce.e] != beforeTies {
			structural = true
		}
	}
	if structural {
		x.components()
		x.account()
	}
	for _, c := range x.changed {
		if c >= 0 {
			x.enqueue(c)
		}
	}
}

// reown1 updates an engine no tree shares after the moving tree shifted
// by t, from the bids the move saw: it goes to the tree if its bid is now
// the best (an exact tie keeps the owner), else to the best other bidder.
// It reports false when the engine neither was nor is the tree's (then
// nothing about it changed).
func (x *ties) reown1(ce *moveEngine, t float64) bool {
	e := ce.e
	v := ce.b + t
	was := x.owner[e] >= 0 && x.inS[x.owner[e]]
	now := v > ce.o || (v == ce.o && was)
	if !was && !now {
		return false
	}
	who, bid := ce.c, v
	if !now {
		who, bid = ce.oc, ce.o
	}
	f := &x.m.eng[e]
	l := 0.0
	switch {
	case who < 0 || bid <= f.a:
	case bid >= f.d1u:
		l = f.u
	case now && ce.lt == t:
		l = ce.l
	default:
		l = f.loadAtPriceFrom(bid, ce.l)
	}
	if x.owner[e] >= 0 {
		x.ownL[x.owner[e]] -= x.load[e]
	}
	x.bid[e], x.owner[e], x.load[e] = bid, who, l
	if who >= 0 {
		x.ownL[who] += l
	}
	return true
}

func (x *ties) tied(c, e int32) bool {
	for _, a := range x.arcs {
		if a.c == c && a.e == e {
			return true
		}
	}
	return false
}

func (x *ties) addArc(a tieArc) {
	x.arcs = append(x.arcs, a)
	if a.e >= 0 {
		x.ties[a.e]++
		x.tieClu[a.e] = a.c
	}
}
