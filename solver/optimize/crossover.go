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
	st     *state
	nodes  int     // clusters, then engines, then the ground
	ground int     // node index of the shed ground
	edges  []xEdge // the forest
	pot    []float64
	prev   []float64 // prices of the last solve, to start each tree's level
	flow   []float64 // per edge, from its cluster to its engine (or ground)
	lam    []float64 // per engine
	adj    [][]int32 // node -> edges
	comp   []int     // node -> tree root
	order  []int     // BFS order of nodes, roots first within each tree
	parent []int32   // node -> edge to its parent, -1 at roots
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
	for i := range maxChanges {
		if !x.solveTrees() {
			st.tracef("  crossover %d: a tree sheds", i)
			continue // a tree ran short of capacity and now sheds
		}
		x.flows()
		if x.dropNegative() {
			st.tracef("  crossover %d: dropped a negative flow", i)
			continue
		}
		if x.addViolated() {
			st.tracef("  crossover %d: added %+v", i, x.edges[len(x.edges)-1])
			continue
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
	x.adj = make([][]int32, x.nodes)
	for i, e := range x.edges {
		x.adj[e.c] = append(x.adj[e.c], int32(i))
		x.adj[e.to] = append(x.adj[e.to], int32(i))
	}
	x.comp = make([]int, x.nodes)
	x.parent = make([]int32, x.nodes)
	for i := range x.comp {
		x.comp[i] = -1
	}
	x.order = x.order[:0]
	roots := append([]int{x.ground}, make([]int, 0, x.nodes)...)
	for v := range x.ground {
		roots = append(roots, v)
	}
	for _, r := range roots {
		if x.comp[r] >= 0 {
			continue
		}
		x.comp[r], x.parent[r] = r, -1
		head := len(x.order)
		x.order = append(x.order, r)
		for ; head < len(x.order); head++ {
			v := x.order[head]
			for _, ei := range x.adj[v] {
				e := x.edges[ei]
				w := int(e.c)
				if w == v {
					w = int(e.to)
				}
				if x.comp[w] < 0 {
					x.comp[w], x.parent[w] = r, ei
					x.order = append(x.order, w)
				}
			}
		}
	}
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
		if math.Abs(g) <= 1e-14*demand {
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
		if next == t {
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

// dropNegative removes the tree arc with the most negative flow, if any
// is negative beyond rounding.
func (x *crossover) dropNegative() bool {
	worst, at := 0.0, -1
	for i, f := range x.flow {
		tol := 1e-9 * x.st.m.demand[x.edges[i].c]
		if f < -tol && f < worst {
			worst, at = f, i
		}
	}
	if at < 0 {
		return false
	}
	x.st.tracef("    drop %+v flow %.6g", x.edges[at], worst)
	x.edges = slices.Delete(x.edges, at, at+1)
	return true
}

// addViolated adds the arc (or shed) most cheaper than the price of its
// cluster, if any is beyond rounding; when it closes a cycle, the cycle's
// arc of least flow leaves.
func (x *crossover) addViolated() bool {
	m := x.st.m
	worst := 0.0
	var add xEdge
	for c, d := range m.demand {
		if d == 0 {
			continue
		}
		tol := 1e-9 * math.Abs(x.pot[c])
		if v := x.pot[c] - m.penalty; v > tol && v > worst {
			worst, add = v, xEdge{int32(c), int32(x.ground), -1, 0}
		}
		lo, hi := m.arcs(c)
		for a := lo; a < hi; a++ {
			e := int(m.arcEng[a])
			if v := x.pot[c] - m.arcNet[a] - x.enginePrice(e); v > tol && v > worst {
				worst, add = v, xEdge{int32(c), int32(m.nc + e), m.arcSlot[a], m.arcNet[a]}
			}
		}
	}
	if worst == 0 {
		return false
	}
	if x.comp[add.c] == x.comp[add.to] {
		x.breakCycle(int(add.c), int(add.to))
	}
	x.edges = append(x.edges, add)
	return true
}

// enginePrice is an engine's price: its tree's, or F'(0) when unused.
func (x *crossover) enginePrice(e int) float64 {
	if x.comp[x.st.m.nc+e] == x.st.m.nc+e && len(x.adj[x.st.m.nc+e]) == 0 {
		return x.st.m.eng[e].a
	}
	return x.pot[x.st.m.nc+e]
}

// breakCycle removes, from the cycle that a new arc from cluster c to
// node to closes, the tree arc that pushing flow around the cycle (more
// along the new arc) would empty first: of the path arcs whose flow falls,
// the one with least flow, as in the simplex ratio test.
func (x *crossover) breakCycle(c, to int) {
	depth := func(n int) int {
		d := 0
		for x.parent[n] >= 0 {
			n = x.other(x.parent[n], n)
			d++
		}
		return d
	}
	weakest, at := math.Inf(1), -1
	consider := func(ei int32, falls bool) {
		if f := x.flow[ei]; falls && f < weakest {
			weakest, at = f, int(ei)
		}
	}
	// The cycle runs c → to → (tree path) → c. Walking up from to, an arc
	// is crossed child to parent; walking up from c, parent to child. An
	// arc's flow (cluster to engine) falls when the cycle crosses it from
	// its engine end to its cluster end.
	u, v := to, c
	du, dv := depth(u), depth(v)
	up := func(n int, fromChild bool) int {
		ei := x.parent[n]
		e := x.edges[ei]
		if fromChild {
			consider(ei, n != int(e.c)) // crossed from n up: falls if n is the engine end
		} else {
			consider(ei, n == int(e.c)) // crossed down to n: falls if n is the cluster end
		}
		return x.other(ei, n)
	}
	for du > dv {
		u, du = up(u, true), du-1
	}
	for dv > du {
		v, dv = up(v, false), dv-1
	}
	for u != v {
		u, v = up(u, true), up(v, false)
	}
	if at >= 0 {
		x.edges = slices.Delete(x.edges, at, at+1)
	}
}

func (x *crossover) other(ei int32, n int) int {
	e := x.edges[ei]
	if int(e.c) == n {
		return int(e.to)
	}
	return int(e.c)
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
