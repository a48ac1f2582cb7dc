package optimize

import (
	"cmp"
	"slices"
)

// net is the network time of cluster c's arc to engine e.
func (x *ties) net(c, e int32) float64 {
	m := x.m
	lo, hi := m.arcs(int(c))
	a, _ := slices.BinarySearch(m.arcEng[lo:hi], e)
	return m.arcNet[lo+a]
}

// forest lays the forest out: adjacency by node (clusters, then engines,
// then the ground), and each tree in BFS order from its root (the
// ground, else its lowest cluster) with every node's parent arc.
type forest struct {
	adjStart, adj []int32
	fill          []int32 // scratch
	order         []int32
	parent        []int32 // per node: arc to the parent, -1 at roots
	seen          []bool
}

func (x *ties) layout(f *forest) {
	m := x.m
	n := m.nc + m.ne + 1
	node := func(a tieArc) int32 {
		if a.e < 0 {
			return int32(m.nc + m.ne)
		}
		return int32(m.nc) + a.e
	}
	f.adjStart = resize(f.adjStart, n+1)
	clear(f.adjStart)
	for _, a := range x.arcs {
		f.adjStart[a.c+1]++
		f.adjStart[node(a)+1]++
	}
	sum, starts := int32(0), f.adjStart // the counts' running sum (adjStart[0] is 0)
	for v, k := range starts {
		sum += k
		starts[v] = sum
	}
	f.adj = resize(f.adj, int(f.adjStart[n]))
	fill := append(f.fill[:0], f.adjStart[:n]...)
	f.fill = fill
	for i, a := range x.arcs {
		for _, v := range [2]int32{a.c, node(a)} {
			f.adj[fill[v]] = int32(i)
			fill[v]++
		}
	}
	f.parent = resize(f.parent, n)
	f.seen = resize(f.seen, n)
	clear(f.seen)
	f.order = f.order[:0]
	bfs := func(r int32) {
		if f.seen[r] {
			return
		}
		f.seen[r], f.parent[r] = true, -1
		head := len(f.order)
		f.order = append(f.order, r)
		for ; head < len(f.order); head++ {
			v := f.order[head]
			for _, ai := range f.adj[f.adjStart[v]:f.adjStart[v+1]] {
				a := x.arcs[ai]
				w := a.c
				if w == v {
					w = node(a)
				}
				if !f.seen[w] {
					f.seen[w], f.parent[w] = true, ai
					f.order = append(f.order, w)
				}
			}
		}
	}
	bfs(int32(m.nc + m.ne))
	for c := range m.nc {
		bfs(int32(c))
	}
}

// snap sets every tree's prices from its root along its arcs, so that the
// arcs' ties hold to rounding: the ground is the shed penalty, a root
// cluster keeps its price.
func (x *ties) snap() {
	m := x.m
	f := &x.snapFr
	x.layout(f)
	gr := int32(m.nc + m.ne)
	price := resize(x.price, m.nc+m.ne+1)
	x.price = price
	price[gr] = m.penalty
	for _, v := range f.order {
		ai := f.parent[v]
		if ai < 0 {
			if v < int32(m.nc) {
				price[v] = x.pi[v]
			}
			continue
		}
		a := x.arcs[ai]
		if v == a.c { // cluster below its engine or the ground
			w := gr
			if a.e >= 0 {
				w = int32(m.nc) + a.e
			}
			price[v] = price[w] + a.net
		} else {
			price[v] = price[a.c] - a.net
		}
	}
	copy(x.pi, price[:m.nc])
	// No cluster of a free tree may be priced above the shed penalty
	// (it would shed): a tree set along new ties from a root below the
	// penalty can reach above it, and then comes down as a whole.
	over := resize(x.over, m.nc)
	x.over = over
	clear(over)
	for c := range m.nc {
		if k := x.label[c]; !x.ground[k] && x.active(c) {
			over[k] = max(over[k], x.pi[c]-m.penalty)
		}
	}
	for c := range m.nc {
		if k := x.label[c]; over[k] > 0 {
			x.pi[c] -= over[k]
		}
	}
}

// flows returns every forest arc's flow, from its cluster to its engine
// (or the ground), by pruning leaves: a cluster supplies its demand less
// the engines it owns alone, a shared engine takes its load.
func (x *ties) flows(f *forest) []float64 {
	m := x.m
	x.layout(f)
	net := make([]float64, m.nc+m.ne+1)

	for c := range m.nc {
		net[c] = m.demand[c] - x.ownL[c]
	}
	for e := range m.ne {
		if x.ties[e] > 0 {
			net[m.nc+e] = -x.load[e]
		}
	}
	flow := make([]float64, len(x.arcs))
	for i := len(f.order) - 1; i >= 0; i-- {
		v := f.order[i]
		ai := f.parent[v]
		if ai < 0 {
			continue
		}
		a := x.arcs[ai]
		if v == a.c {
			flow[ai] = net[v]
			net[x.toNode(a)] += net[v]
		} else {
			flow[ai] = -net[v]
			net[a.c] += net[v]
		}
	}
	return flow
}

func (x *ties) toNode(a tieArc) int32 {
	if a.e < 0 {
		return int32(x.m.nc + x.m.ne)
	}
	return int32(x.m.nc) + a.e
}

// splitNegative removes the forest arc with the most negative flow
// (beyond rounding), and arcs left alone on their engine, and queues the
// trees it leaves. It reports whether it removed one.
func (x *ties) splitNegative() bool {
	flow := x.flows(&x.fr)
	worst, at := 0.0, -1
	var cut []tieArc
	for i, a := range x.arcs {
		r := flow[i] / x.m.demand[a.c]
		if r < -1e-9 {
			cut = append(cut, a)
			if r < worst {
				worst, at = r, i
			}
		}
	}
	if at < 0 {
		return false
	}
	if !splitAll {
		cut = append(cut[:0], x.arcs[at])
	}
	x.splits += len(cut)
	if x.trace != nil {
		x.trace("split %v flow %.9g (%d arcs)", x.arcs[at], flow[at], len(cut))
	}
	x.removeArcs(func(a tieArc) bool { return slices.Contains(cut, a) })
	return true
}

// splitAll splits every arc with a negative flow at once: each side
// then moves on its own, which takes fewer pivots than one split at a
// time.
const splitAll = true

// untie drops every forest arc of engine e: someone not tied to it bids
// more.
func (x *ties) untie(e int32) {
	x.splits++
	if x.trace != nil {
		x.trace("untie e%d", e)
	}
	x.removeArcs(func(a tieArc) bool { return a.e == e })
}

// removeArcs removes the arcs drop selects, then arcs left alone on their
// engine (an engine one cluster bids for is simply owned), moves the
// loads of engines no longer shared to their owners' accounts, relabels
// the trees and queues the ones that changed.
func (x *ties) removeArcs(drop func(tieArc) bool) {
	touched := x.changed[:0]
	cut := func(pred func(tieArc) bool) {
		keep := x.arcs[:0]
		for _, a := range x.arcs {
			if !pred(a) {
				keep = append(keep, a)
				continue
			}
			touched = append(touched, a.c)
		}
		x.arcs = keep
		x.recount()
	}
	cut(drop)
	cut(func(a tieArc) bool { return a.e >= 0 && x.ties[a.e] < 2 })
	x.account()
	x.changed = touched
	x.components()
	for _, c := range touched {
		x.enqueue(c)
	}
}

// account sets every cluster's owned load: the loads of the engines it
// owns that are not shared.
func (x *ties) account() {
	ownL, ties, load := x.ownL, x.ties, x.load // (locals: see gather)
	clear(ownL)
	owner := x.owner[:len(ties)]
	load = load[:len(ties)]
	for e, n := range ties {
		if c := owner[e]; c >= 0 && n == 0 {
			ownL[c] += load[e]
		}
	}
}

// recount sets every engine's count of forest arcs and a tied cluster.
func (x *ties) recount() {
	clear(x.ties)
	for _, a := range x.arcs {
		if a.e >= 0 {
			x.ties[a.e]++
			x.tieClu[a.e] = a.c
		}
	}
}

// components labels clusters by tree (each by its lowest cluster) and
// marks the trees tied to the ground.
func (x *ties) components() {
	m := x.m
	g := &x.grp
	gr := m.nc + m.ne
	// Only the nodes of the last call's arcs can have left their
	// singletons (unions and finds move nothing else), so those are put
	// back rather than all ne+nc+1: the same union-find as a reset's.
	if len(g.parent) != gr+1 {
		g.reset(gr + 1)
	} else {
		for _, v := range x.grpUsed {
			g.parent[v] = int(v)
		}
	}
	used := x.grpUsed[:0]
	for _, a := range x.arcs {
		to := x.toNode(a)
		used = append(used, a.c, to)
		g.union(int(a.c), int(to))
	}
	x.grpUsed = used
	for c := range m.nc {
		x.label[c] = int32(g.find(c))
		x.ground[c] = false
	}
	root := g.find(gr)
	for c := range m.nc {
		if g.find(c) == root {
			x.ground[x.label[c]] = true
		}
	}
}

// point packs the state as a point: prices, loads, flows by engine in
// slot order, sheds.
func (x *ties) point() *point {
	m := x.m
	p := newPoint(m.nc, m.ne)
	copy(p.pi, x.pi)
	var f forest
	flow := x.flows(&f)
	type arcFlow struct {
		slot int32
		x    float64
	}
	var arcs []arcFlow
	slotOf := func(c, e int32) int32 {
		lo, hi := m.arcs(int(c))
		a, _ := slices.BinarySearch(m.arcEng[lo:hi], e)
		return m.arcSlot[lo+a]
	}
	for i, a := range x.arcs {
		v := max(0, flow[i])
		if a.e < 0 {
			p.s[a.c] += v
		} else if v > 0 {
			arcs = append(arcs, arcFlow{slotOf(a.c, a.e), v})
		}
	}
	for e := range m.ne {
		p.lam[e] = x.load[e]
		p.mu[e] = max(x.bid[e], m.eng[e].a)
		if x.ties[e] == 0 && x.owner[e] >= 0 && x.load[e] > 0 {
			arcs = append(arcs, arcFlow{slotOf(x.owner[e], int32(e)), x.load[e]})
		}
	}
	slices.SortFunc(arcs, func(a, b arcFlow) int { return int(a.slot - b.slot) })
	next := 0
	for e := range m.ne {
		p.actStart[e] = int32(len(p.act))
		for next < len(arcs) && arcs[next].slot < m.eStart[e+1] {
			p.act = append(p.act, arcs[next].slot)
			p.actX = append(p.actX, arcs[next].x)
			next++
		}
	}
	p.actStart[m.ne] = int32(len(p.act))
	for c, d := range m.demand {
		p.grad[c] = d - p.s[c]
	}
	for i, k := range p.act {
		p.grad[m.slotClu[k]] -= p.actX[i]
	}
	return p
}

// tiesFrom seeds the forest from a point's flows: the arcs into engines
// that two or more clusters use, and the sheds, largest flows first, as
// far as they form a forest.
func (x *ties) tiesFrom(p *point) {
	m := x.m
	type cand struct {
		a    tieArc
		size float64
		rank int // order appended
	}
	// (at most every flow and every shed: one allocation, where appending
	// from nil took 1.3 MB a 100x1000 cold solve)
	cands := make([]cand, 0, len(p.act)+m.nc)
	for e := range m.ne {
		lo, hi := p.actStart[e], p.actStart[e+1]
		n := 0
		for i := lo; i < hi; i++ {
			if p.actX[i] > 1e-9*m.demand[m.slotClu[p.act[i]]] {
				n++
			}
		}
		if n < 2 {
			continue
		}
		for i := lo; i < hi; i++ {
			k := p.act[i]
			if p.actX[i] > 1e-9*m.demand[m.slotClu[k]] {
				cands = append(cands, cand{tieArc{m.slotClu[k], int32(e), m.slotNet[k]}, p.actX[i], len(cands)})
			}
		}
	}
	for c, s := range p.s {
		if s > 1e-9*m.demand[c] {
			cands = append(cands, cand{tieArc{int32(c), -1, 0}, s, len(cands)})
		}
	}
	// Largest first, in the order appended on equal sizes (engines
	// ascending, clusters ascending within one, then the sheds): a
	// stable sort's order, by an unstable sort on a total order (the
	// stable merge sort took 1-2 ms of a 100x1000 cold solve's 8,000).
	slices.SortFunc(cands, func(a, b cand) int {
		if c := cmpFloat(b.size, a.size); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	g := newGroups(m.nc + m.ne + 1)
	for _, cd := range cands {
		to := int(x.toNode(cd.a))
		if g.find(int(cd.a.c)) != g.find(to) {
			g.union(int(cd.a.c), to)
			x.arcs = append(x.arcs, cd.a)
		}
	}
	x.recount()
	x.arcs = slices.DeleteFunc(x.arcs, func(a tieArc) bool { return a.e >= 0 && x.ties[a.e] < 2 })
	x.recount()
	x.components()
	x.snap()
}
