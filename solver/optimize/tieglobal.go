package optimize

import (
	"math"
	"slices"
)

// jacobi moves every free tree at once, each by its own Newton step
// (imbalance over the slope of its owned engines' loads) scaled by one
// common factor α that maximises the dual along the joint direction, with
// ownership following the prices. Trees then ignore each other's
// response, but a fleet-wide or region-wide shortage, which single-tree
// moves would climb out of in many small steps, moves all its trees in
// one. It reports whether it moved.
func (x *ties) jacobi() bool {
	m := x.m
	dir := x.dir
	if dir == nil {
		dir = make([]float64, m.nc)
		x.dir = dir
	}
	clear(dir)
	g := make([]float64, m.nc)
	curv := make([]float64, m.nc)
	for e := range m.ne {
		c := x.owner[e]
		if c < 0 {
			continue
		}
		f := &m.eng[e]
		if l := x.load[e]; l > 0 && l < f.u {
			_, d2 := f.marginal(l)
			curv[x.label[c]] += 1 / d2
		}
		g[x.label[c]] -= x.load[e]
	}
	for c := range m.nc {
		g[x.label[c]] += m.demand[c]
	}
	moved := false
	for c := range m.nc {
		k := x.label[c]
		if x.ground[k] || !x.active(c) || !(curv[k] > 0) || math.Abs(g[k]) <= 1e-9*m.demand[c] {
			continue
		}
		dir[c] = g[k] / curv[k]
		moved = true
	}
	if !moved {
		return false
	}
	// Keep the move inside what the bid lists cover.
	spread := 0.0
	for _, d := range dir {
		spread = max(spread, math.Abs(d))
	}
	room := x.bids.room(x.pi, x.active)
	hi := 1.0
	if 2*spread > room {
		hi = room / (2 * spread)
	}
	a := x.lineSearch(dir, hi)
	if x.trace != nil {
		tot := 0.0
		for c := range m.nc {
			if int(x.label[c]) == c {
				tot += math.Abs(g[c])
			}
		}
		x.trace("jacobi: |g| %.6g spread %.4g room %.4g hi %.4g a %.4g", tot, spread, room, hi, a)
	}
	if a == 0 {
		return false
	}
	for c := range m.nc {
		x.pi[c] += a * dir[c]
	}
	x.moves++
	x.jacobis++
	x.refresh()
	return true
}

// dualSlope is the derivative of the dual along dir at π + a·dir: Σ over
// clusters of dir·(unshed demand) less Σ over engines of dir(owner)·load.
func (x *ties) dualSlope(dir []float64, a float64) float64 {
	m := x.m
	s := 0.0
	for c, d := range dir {
		if d != 0 && x.pi[c]+a*d < m.penalty {
			s += d * m.demand[c]
		}
	}
	for e := range m.ne {
		best, who := math.Inf(-1), int32(-1)
		for _, k := range x.bids.engine(int32(e)) {
			c := m.slotClu[k]
			if b := x.pi[c] + a*dir[c] - m.slotNet[k]; b > best {
				best, who = b, c
			}
		}
		if who < 0 || dir[who] == 0 {
			continue
		}
		f := &m.eng[e]
		if best > f.a {
			s -= dir[who] * f.loadAtPriceFrom(best, x.load[e])
		}
	}
	return s
}

// lineSearch maximises the dual along dir over a in [0, hi] (it is
// concave there, so its slope falls): regula falsi on the slope.
func (x *ties) lineSearch(dir []float64, hi float64) float64 {
	s0 := x.dualSlope(dir, 0)
	if s0 <= 0 {
		return 0
	}
	sh := x.dualSlope(dir, hi)
	if sh >= 0 {
		return hi
	}
	lo, slo := 0.0, s0
	a := hi
	for range 30 {
		a = lo + slo*(hi-lo)/(slo-sh)
		if !(a > lo && a < hi) {
			a = lo + (hi-lo)/2
		}
		s := x.dualSlope(dir, a)
		if math.Abs(s) <= 1e-6*s0 {
			break
		}
		if s > 0 {
			lo, slo = a, s
		} else {
			hi, sh = a, s
		}
		if hi-lo <= 1e-9*hi {
			break
		}
	}
	return a
}

// seedTies ties, at the start of a cold solve, the clusters that bid
// almost alike for an engine (within gapMs): clusters close to each
// other compete for the same engines and end up sharing them, and moving
// them together from the start saves the many small moves by which they
// would otherwise outbid each other. Engines closest to a tie go first,
// as long as the ties form a forest; wrong ones split off later.
func (x *ties) seedTies(gapMs float64) {
	m := x.m
	type near struct {
		gap    float64
		e      int32
		c1, c2 int32
	}
	var cands []near
	for e := range m.ne {
		b1, b2 := math.Inf(-1), math.Inf(-1)
		c1, c2 := int32(-1), int32(-1)
		for _, k := range x.bids.engine(int32(e)) {
			c := m.slotClu[k]
			b := x.pi[c] - m.slotNet[k]
			switch {
			case b > b1:
				b2, c2 = b1, c1
				b1, c1 = b, c
			case b > b2:
				b2, c2 = b, c
			}
		}
		if c2 >= 0 && b1-b2 < gapMs && b1 > m.eng[e].a {
			cands = append(cands, near{b1 - b2, int32(e), c1, c2})
		}
	}
	slices.SortFunc(cands, func(a, b near) int {
		if c := cmpFloat(a.gap, b.gap); c != 0 {
			return c
		}
		return int(a.e - b.e)
	})
	g := newGroups(m.nc)
	for _, cd := range cands {
		if g.find(int(cd.c1)) == g.find(int(cd.c2)) {
			continue
		}
		g.union(int(cd.c1), int(cd.c2))
		x.addArc(tieArc{cd.c1, cd.e, x.net(cd.c1, cd.e)})
		x.addArc(tieArc{cd.c2, cd.e, x.net(cd.c2, cd.e)})
	}
	x.components()
	x.snap()
	x.refresh()
}
