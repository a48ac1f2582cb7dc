package optimize

import (
	"fmt"
	"math"
)

// moveEngine is an engine a moving tree bids for: its best bid from the
// tree (b, by cluster c) and from every other tree (o, by cluster oc).
type moveEngine struct {
	e, c, oc int32
	b, o     float64
	bn, on   float64 // network ms of c's and oc's arcs
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
// within the bid lists, with the best bid from inside and from outside,
// in the order the members' lists first name them. It leaves out the
// engines the tree cannot reach in a move of at most room (farOff); the
// move, its kinks and the owners it updates are the same without them.
//
// The tree's best bid for an engine, and the first member (lowest index)
// making it, come from the members' lists, which hold the same arcs as
// the engine's; the best outside bid then needs one comparison per
// bidder (bidsFor).
func (x *ties) candidates(members []int32, room float64) {
	x.gather(members)
	x.pick(room)
}

// gather sets the tree's best bid, first member making it and its network
// ms for every engine the members' lists name (treeBid, treeClu,
// treeNet), the engines in the order first named (order), and each
// cluster's price outside the tree (outPi). It holds until the tree's
// prices or members change: visit's second pick, over the whole room
// after the window, reads it again.
func (x *ties) gather(members []int32) {
	// (the slices in locals: the stores below would make the compiler
	// load x's fields again for every arc)
	treeBid := x.treeBid
	treeClu, treeNet := x.treeClu[:len(treeBid)], x.treeNet[:len(treeBid)]
	for _, e := range x.order {
		treeBid[e] = math.Inf(-1) // the last gather's
	}
	// order is written by index, with room for every engine, not
	// appended to, and each member's arcs are one call of gatherArcs:
	// in this loop a call to grow order, and the loop's many values, made
	// the compiler keep its values on the stack, loads and stores more
	// for every arc.
	order := x.order[:cap(x.order)]
	if len(order) < len(treeBid) {
		order = make([]int32, len(treeBid))
	}
	named := 0
	for _, c := range members {
		engines, nets := x.bids.clusterArcs(c)
		named = gatherArcs(x.pi[c], c, engines, nets, treeBid, treeClu, treeNet, order, named)
	}
	x.order = order[:named]
	x.outPi = resize(x.outPi, x.m.nc)
	x.nobodyOut = true
	for c, p := range x.pi {
		x.outPi[c] = p
		if x.inS[c] {
			x.outPi[c] = math.Inf(-1)
		} else if x.active(c) {
			x.nobodyOut = false
		}
	}
}

// gatherArcs is gather's pass over one member c's listed arcs (engines,
// nets) at its price pc: it raises treeBid where c bids more, names in
// order[named:] the engines no member named before, and returns the new
// count named.
func gatherArcs(pc float64, c int32, engines []int32, nets []float64, treeBid []float64, treeClu []int32, treeNet []float64, order []int32, named int) int {
	nets = nets[:len(engines)]
	treeClu, treeNet = treeClu[:len(treeBid)], treeNet[:len(treeBid)]
	for i, e := range engines {
		// treeBid is -Inf for an engine no member named yet (bids are
		// finite): the first naming sets it, and only a higher bid
		// replaces it, so the first member making the best bid stays.
		n := nets[i]
		if v, tb := pc-n, treeBid[e]; v > tb {
			if tb == math.Inf(-1) {
				order[named] = e
				named++
			}
			treeBid[e], treeClu[e], treeNet[e] = v, c, n
		}
	}
	return named
}

// pick makes the candidates from the last gather: the engines named, in
// order, but those farOff in a move of room.
func (x *ties) pick(room float64) {
	x.cand = x.cand[:0]
	for _, e := range x.order {
		if !x.farOff(e, x.treeBid[e], room) {
			x.cand = append(x.cand, moveEngine{})
			x.bidsFor(&x.cand[len(x.cand)-1], e)
		}
	}
}

// farOff reports whether the moving tree, whose best bid for engine e is
// b, stays more than room (and a ms for rounding) below e's owner, a
// cluster outside it: then even a move of room leaves e to others, so e
// neither sets a kink nor changes hands. The best outside bid bidsFor
// would find is at least the owner's: the best bid of all is listed
// (room ≥ 0), and it is not the tree's, which is below the owner's.
func (x *ties) farOff(e int32, b, room float64) bool {
	o := x.owner[e]
	if x.ties[e] > 0 || o < 0 || x.inS[o] {
		return false
	}
	return b < x.pi[o]-x.ownNet[e]-room-1
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
						me.b, me.c, me.bn = v, c, m.slotNet[k]
					}
				} else if v > me.o {
					me.o, me.oc, me.on = v, c, m.slotNet[k]
				}
			}
			if math.Abs(me.b-me.o) <= tieTol*max(1, math.Abs(me.b)) {
				me.o = me.b
			}
			x.cand = append(x.cand, me)
		}
	}
}

// bidsFor is engine e's best bids from the moving tree (gathered by
// candidates) and from others: the first bidder (lowest index) making the
// best bid among those outside the tree, whose outPi is their price (the
// members' is -Inf, which never wins). It writes them to me, in place in
// the candidates (returned, the struct was copied twice).
func (x *ties) bidsFor(me *moveEngine, e int32) {
	*me = moveEngine{e: e, c: x.treeClu[e], oc: -1, b: x.treeBid[e], o: math.Inf(-1), bn: x.treeNet[e], l: x.load[e]}
	if o := x.owner[e]; x.ties[e] == 0 && o >= 0 && !x.inS[o] {
		// Owned by a cluster outside the tree: the owner's bid is the
		// best of all, so the best from outside. Which outside cluster
		// makes it first matters only if the move ties e (apply).
		me.o, me.oc = x.pi[o]-x.ownNet[e], ocUnresolved
	} else if !x.nobodyOut {
		me.o, me.oc, me.on = x.bestOutside(e)
	} // else every bidder is in the tree: bestOutside's -Inf, -1 (me's)
	if math.Abs(me.b-me.o) <= tieTol*max(1, math.Abs(me.b)) {
		me.o = me.b // tied to rounding: the kink is here
	}
}

// ocUnresolved marks a candidate whose best outside bid is known but not
// the first outside cluster making it (bidsFor); apply finds it when it
// ties the engine, reown1 never reads it (the tree did not own e).
const ocUnresolved = -2

// bestOutside is engine e's best bid from clusters outside the moving
// tree (whose outPi is their price) and the first listed bidder (lowest
// index) making it, with its network ms.
func (x *ties) bestOutside(e int32) (o float64, oc int32, on float64) {
	o, oc = math.Inf(-1), -1
	clu, net := x.bids.bidders(e)
	outPi := x.outPi // (a local: the field was loaded again for every bidder)
	for i, c := range clu {
		if v := outPi[c] - net[i]; v > o {
			o, oc, on = v, c, net[i]
		}
	}
	return o, oc, on
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
	if r.t == 0 {
		x.stuck++
	} else {
		x.stuck = 0
	}
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
		ce := &x.cand[r.kinkAt]
		if ce.oc == ocUnresolved {
			_, ce.oc, ce.on = x.bestOutside(ce.e)
		}
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
	who, bid, wn := ce.c, v, ce.bn
	if !now {
		if ce.oc == ocUnresolved {
			_, ce.oc, ce.on = x.bestOutside(e)
		}
		who, bid, wn = ce.oc, ce.o, ce.on
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
	x.bid[e], x.owner[e], x.load[e], x.ownNet[e] = bid, who, l, wn
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
