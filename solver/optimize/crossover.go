package optimize

import (
	"math"
	"slices"
)

// crossover finishes exactly from a near-optimal point. At the optimum the
// arcs that carry flow, with shedding as arcs to a ground node priced at
// the shed penalty, form a forest in which every used arc is tight:
// π_c − n_ce = μ_e. Given the forest, each tree's prices are one unknown t
// plus offsets read along its arcs, its engines' loads are Λ_e(t + o_e)
// (the load at which F' equals the price, clipped to [0, u]), and t solves
// the tree's balance, demand = Σ loads, a monotone equation in one
// variable. The flows then follow from the tree by pruning leaves. If every
// flow is non-negative and no arc outside the forest is cheaper than its
// engine's price, the KKT conditions hold to rounding and the certificate
// closes; otherwise the worst violation changes the forest (a negative arc
// leaves; a cheaper arc or a needed shed joins, and if it closes a cycle
// the cycle's weakest arc leaves) and the trees are solved again. Like a
// simplex crossover after an interior method, it needs few changes when
// started near the optimum, and gives up (reporting false) after
// maxChanges.
type crossover struct {
	st       *state
	nodes    int     // clusters, then engines, then the ground
	ground   int     // node index of the shed ground
	edges    []xEdge // the forest
	pot      []float64
	prev     []float64 // prices of the last solve, to start each tree's level
	flow     []float64 // per edge, from its cluster to its engine (or ground)
	lam      []float64 // per engine
	adjStart []int32   // node v's edges: adjList[adjStart[v]:adjStart[v+1]]
	adjList  []int32
	fill     []int32    // scratch
	price    []float64  // per engine, during addViolated
	near     []int32    // arcs near tight at the last full scan
	scanned  []float64  // node prices at the last full scan
	viol     []violator // scratch: violated arcs of one pass
	comp     []int      // node -> tree root
	order    []int      // BFS order of nodes, roots first within each tree
	parent   []int32    // node -> edge to its parent, -1 at roots
}

// xEdge is a forest arc: from a cluster to an engine node, with the
// network time between them, or a shed arc to the ground, whose price is
// the shed penalty itself (net 0).
type xEdge struct {
	c    int32 // cluster
	to   int32 // engine node or ground
	slot int32 // arc slot, -1 for shed
	net  float64
}

func (st *state) crossover(p *point, maxChanges int) (*point, bool) {
	m := st.m
	x := &crossover{st: st, nodes: m.nc + m.ne + 1, ground: m.nc + m.ne}
	x.initForest(p)
	for pass := range maxChanges {
		if !x.solveTrees() {
			continue // a tree ran short of capacity and now sheds
		}
		x.flows()
		if x.dropNegative() || x.addViolated() {
			continue
		}
		if st.trace != nil {
			st.tracef("crossover closed after %d passes", pass)
		}
		return x.point(), true
	}
	return nil, false
}

// initForest keeps the point's flows and sheds that form a forest, larger
// flows first.
func (x *crossover) initForest(p *point) {
	m := x.st.m
	type cand struct {
		e    xEdge
		size float64
	}
	var cands []cand
	for e := range m.ne {
		for i := p.actStart[e]; i < p.actStart[e+1]; i++ {
			k := p.act[i]
			if p.actX[i] > 1e-9*m.demand[m.slotClu[k]] {
				cands = append(cands, cand{xEdge{m.slotClu[k], int32(m.nc + e), k, m.slotNet[k]}, p.actX[i]})
			}
		}
	}
	for c, s := range p.s {
		if s > 1e-9*m.demand[c] {
			cands = append(cands, cand{xEdge{int32(c), int32(x.ground), -1, 0}, s})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmpFloat(b.size, a.size) })
	g := newGroups(x.nodes)
	for _, cd := range cands {
		if g.find(int(cd.e.c)) != g.find(int(cd.e.to)) {
			g.union(int(cd.e.c), int(cd.e.to))
			x.edges = append(x.edges, cd.e)
		}
	}
}

// build lays out the forest: adjacency, trees (rooted at the ground, else
// at their lowest node) in BFS order, and parent edges.
func (x *crossover) build() {
	n := x.nodes
	x.adjStart = resize(x.adjStart, n+1)
	clear(x.adjStart)
	for _, e := range x.edges {
		x.adjStart[e.c+1]++
		x.adjStart[e.to+1]++
	}
	for v := range n {
		x.adjStart[v+1] += x.adjStart[v]
	}
	x.adjList = resize(x.adjList, int(x.adjStart[n]))
	fill := append(x.fill[:0], x.adjStart[:n]...)
	x.fill = fill
	for i, e := range x.edges {
		x.adjList[fill[e.c]] = int32(i)
		fill[e.c]++
		x.adjList[fill[e.to]] = int32(i)
		fill[e.to]++
	}
	x.comp = resize(x.comp, n)
	x.parent = resize(x.parent, n)
	for i := range x.comp {
		x.comp[i] = -1
	}
	x.order = x.order[:0]
	x.bfs(x.ground)
	for v := range x.ground {
		x.bfs(v)
	}
}

// bfs lays out the tree of r, if r is not placed yet.
func (x *crossover) bfs(r int) {
	if x.comp[r] >= 0 {
		return
	}
	x.comp[r], x.parent[r] = r, -1
	head := len(x.order)
	x.order = append(x.order, r)
	for ; head < len(x.order); head++ {
		v := x.order[head]
		for _, ei := range x.adjList[x.adjStart[v]:x.adjStart[v+1]] {
			w := x.other(ei, v)
			if x.comp[w] < 0 {
				x.comp[w], x.parent[w] = r, ei
				x.order = append(x.order, w)
			}
		}
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// solveTrees sets every node's price: offsets along tree arcs, then each
// tree's level t from its balance (trees holding the ground are fixed by
// it). It reports false after making a tree that cannot carry its demand
// at any price shed, which changes the forest.
func (x *crossover) solveTrees() bool {
	st, m := x.st, x.st.m
	x.build()
	if x.pot != nil {
		x.prev = append(x.prev[:0], x.pot...)
	}
	x.pot = make([]float64, x.nodes)
	x.pot[x.ground] = m.penalty
	for _, v := range x.order {
		ei := x.parent[v]
		if ei < 0 {
			continue
		}
		e := x.edges[ei]
		if v == int(e.c) { // cluster below its engine (or ground)
			x.pot[v] = x.pot[e.to] + e.net
		} else {
			x.pot[v] = x.pot[e.c] - e.net
		}
	}
	if x.lam == nil {
		x.lam = make([]float64, m.ne)
	}
	start := 0
	for start < len(x.order) {
		r := x.comp[x.order[start]]
		end := start
		for end < len(x.order) && x.comp[x.order[end]] == r {
			end++
		}
		if r != x.ground && !x.level(x.order[start:end]) {
			return false
		}
		if r == x.ground { // prices fixed by the ground: loads follow
			for _, v := range x.order[start:end] {
				if e := v - m.nc; e >= 0 && v < x.ground {
					x.lam[e] = m.eng[e].loadAtPriceFrom(x.pot[v], x.lam[e])
				}
			}
		}
		start = end
	}
	_ = st
	return true
}

// level shifts one tree's prices so its engines take its demand. When
// they cannot, even at the load caps, the tree's cluster with the highest
// price starts to shed.
func (x *crossover) level(nodes []int) bool {
	m := x.st.m
	demand, capacity := 0.0, 0.0
	var engines []int
	best := -1
	for _, v := range nodes {
		switch {
		case v < m.nc:
			demand += m.demand[v]
			if best < 0 || x.pot[v] > x.pot[best] {
				best = v
			}
		case v < x.ground:
			engines = append(engines, v)
			capacity += m.eng[v-m.nc].u
		}
	}
	if capacity <= demand {
		if best >= 0 {
			x.edges = append(x.edges, xEdge{int32(best), int32(x.ground), -1, 0})
		}
		return false
	}
	// supply(t) = Σ Λ_e(pot_e + t) is continuous and non-decreasing.
	supply := func(t float64) (s, slope float64) {
		for _, v := range engines {
			f := &m.eng[v-m.nc]
			l := f.loadAtPriceFrom(x.pot[v]+t, x.lam[v-m.nc])
			x.lam[v-m.nc] = l
			s += l
			if l > 0 && l < f.u {
				_, d2 := f.marginal(l)
				slope += 1 / d2
			}
		}
		return s, slope
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	t := 0.0
	if x.prev != nil {
		t = x.prev[nodes[0]] - x.pot[nodes[0]] // the root's last price
	}
	for range 200 {
		s, slope := supply(t)
		g := s - demand
		// Loads are exact to about 1e-15 each; their sum to about 1e-13.
		if math.Abs(g) <= 1e-12*demand {
			break
		}
		if g < 0 {
			lo = t
		} else {
			hi = t
		}
		next := t - g/slope
		if slope == 0 || !(next > lo && next < hi) {
			switch {
			case math.IsInf(hi, 1):
				next = t + max(1, 2*math.Abs(t))
			case math.IsInf(lo, -1):
				next = t - max(1, 2*math.Abs(t))
			default:
				next = lo + (hi-lo)/2
			}
		}
		if math.Abs(next-t) <= 1e-15*max(1, math.Abs(t)) {
			break
		}
		t = next
	}
	for _, v := range nodes {
		x.pot[v] += t
	}
	for _, v := range engines {
		e := v - m.nc
		x.lam[e] = m.eng[e].loadAtPriceFrom(x.pot[v], x.lam[e])
	}
	return true
}

// flows computes every tree arc's flow by pruning leaves: a node's subtree
// supply (demand of clusters less loads of engines) crosses its parent arc.
func (x *crossover) flows() {
	m := x.st.m
	net := make([]float64, x.nodes)
	for v := range m.nc {
		net[v] = m.demand[v]
	}
	for e := range m.ne {
		net[m.nc+e] = -x.lam[e]
	}
	x.flow = make([]float64, len(x.edges))
	for i := len(x.order) - 1; i >= 0; i-- {
		v := x.order[i]
		ei := x.parent[v]
		if ei < 0 {
			continue
		}
		e := x.edges[ei]
		if v == int(e.c) {
			x.flow[ei] = net[v]
			net[e.to] += net[v]
		} else {
			x.flow[ei] = -net[v]
			net[e.c] += net[v]
		}
	}
}

// point packs the solved forest as a point: prices, loads, flows by engine
// in slot order, sheds.
func (x *crossover) point() *point {
	m := x.st.m
	p := newPoint(m.nc, m.ne)
	copy(p.pi, x.pot[:m.nc])
	for e := range m.ne {
		p.mu[e] = x.enginePrice(e)
		p.lam[e] = x.lam[e]
	}
	type arcFlow struct {
		slot int32
		x    float64
	}
	var arcs []arcFlow
	for i, e := range x.edges {
		f := max(0, x.flow[i])
		if e.slot < 0 {
			p.s[e.c] += f
		} else if f > 0 {
			arcs = append(arcs, arcFlow{e.slot, f})
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
