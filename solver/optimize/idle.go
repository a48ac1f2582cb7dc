package optimize

import "math"

// jumpIdle moves the prices of every idle group of clusters straight to
// the group's next breakpoint. Clusters sharing an engine they send flow to
// form a group; it is idle when all of them together do not respond to a
// common price change: no member sheds and every engine they use is at its
// load cap (a capped engine's price moves with its users' prices, its load
// does not). An idle group short of demand raises its prices together
// until an arc to an engine outside the group, or shedding, starts to take
// flow; one with too much lowers them until one of its engines drops below
// the cap. The dual rises all the way (the move is along a null direction
// of the Hessian with a constant slope), so this is exact and costs one
// evaluation; left to Newton, such a direction would get a huge step and
// the line search would shrink every other cluster's step with it. It
// reports whether it moved anything.
func (st *state) jumpIdle() bool {
	m, p := st.m, st.cur
	g := newGroups(m.nc)
	responsive := make([]bool, m.nc)
	for c := range m.nc {
		responsive[c] = st.w[c] == 0 || p.s[c] > 0
	}
	// An engine's users join the group of its first user, found once
	// (and nothing once one group holds every cluster: sets counts them),
	// as newtonWork.join: only roots are read, and a root is its group's
	// lowest cluster whatever the order of joins, as with union.
	sets := m.nc
	for e := range m.ne {
		act := p.act[p.actStart[e]:p.actStart[e+1]]
		if len(act) > 1 && sets > 1 {
			r := g.find(int(m.slotClu[act[0]]))
			for _, k := range act[1:] {
				var joined bool
				if r, joined = g.link(r, g.find(int(m.slotClu[k]))); joined {
					sets--
				}
			}
		}
		if len(act) > 0 && p.lam[e] < m.eng[e].u {
			responsive[m.slotClu[act[0]]] = true
		}
	}
	idle := make([]bool, m.nc) // by group root
	grad := make([]float64, m.nc)
	for c := range m.nc {
		r := g.find(c)
		idle[r] = true
		grad[r] += p.grad[c]
	}
	for c := range m.nc {
		if responsive[c] {
			idle[g.find(c)] = false
		}
	}
	step := st.idleSteps(g, idle, grad)
	moved := false
	copy(st.trial.pi, p.pi)
	for r := range m.nc {
		if !idle[r] || g.find(r) != r || grad[r] == 0 {
			continue
		}
		d := step[r]
		if d == 0 || math.IsInf(d, 0) || math.IsNaN(d) {
			continue
		}
		if grad[r] < 0 {
			d = -d
		}
		d += 1e-9 * d
		for c := range m.nc {
			if g.find(c) == r {
				st.trial.pi[c] = min(max(p.pi[c]+d, st.piLo[c]), st.piHi[c])
				moved = true
			}
		}
	}
	if !moved {
		return false
	}
	st.evaluate(st.trial, p)
	if st.trial.value < p.value {
		return false // rounding or a missed breakpoint: leave it to Newton
	}
	st.cur, st.trial = st.trial, st.cur
	return true
}

// idleSteps returns, by group root, how far each idle group's prices move
// to its next breakpoint (groupBreakpoint). A group whose breakpoint is
// an arc meeting another idle group moving the same way is first joined
// with it: both move by the same amount, so that arc never starts or
// stops flowing. Moved one at a time, such groups leapfrogged: each
// stopped a few ms on, where its arcs met the other's engines, hundreds
// of times on the way to the shed penalty or down from it (721 Newton
// steps on one random 100x1000 fleet at 105% load). The churn solve
// (one round centred on the previous solution, Options.ChurnMs) still
// moves them one at a time: its groups start near their prices, and it
// is the solve the backtester routes by, whose results changed with it
// (on main at d39c09a, the overload hour's SLO attainment 0.2327 to
// 0.2267; whether from the feedback loop's sensitivity or from worse
// churn solves was not checked).
func (st *state) idleSteps(g *groups, idle []bool, grad []float64) []float64 {
	m := st.m
	step := make([]float64, m.nc)
	bp := newBreakpoints(m.nc)
	for pass := 0; ; pass++ {
		joined := false
		// Every root's breakpoint, in one pass over the engines and one
		// over the clusters. A join below changes only the two groups it
		// joins, which this pass does not visit again: the roots it still
		// visits have the members, and so the breakpoints, they had here.
		st.groupBreakpoints(g, idle, grad, bp)
		for r := range m.nc {
			if !idle[r] || g.find(r) != r || grad[r] == 0 {
				continue
			}
			d, by := bp.d[r], bp.by[r]
			step[r] = d
			if by < 0 || pass >= m.nc || st.churn {
				continue
			}
			o := g.find(by)
			if o == r || !idle[o] || (grad[o] > 0) != (grad[r] > 0) || grad[o] == 0 {
				continue
			}
			g.union(r, o)
			root := g.find(r)
			sum := grad[r] + grad[o]
			grad[r], grad[o], idle[r], idle[o] = 0, 0, false, false
			grad[root], idle[root] = sum, true
			joined = true
		}
		if !joined {
			return step
		}
	}
}

// breakpoints is groupBreakpoints' result and scratch, by group root:
// how far the group's prices move to its next breakpoint (d), and a
// cluster of the group met there or -1 (by).
type breakpoints struct {
	d    []float64
	by   []int
	root []int  // scratch: per cluster, its group's root
	dir  []int8 // scratch: per root, +1 rising, -1 falling, 0 not moving
}

func newBreakpoints(nc int) *breakpoints {
	return &breakpoints{d: make([]float64, nc), by: make([]int, nc), root: make([]int, nc), dir: make([]int8, nc)}
}

// groupBreakpoints sets, for every idle group r with grad[r] ≠ 0, how far
// its prices must rise (grad > 0) or fall to reach its next breakpoint,
// and a cluster of the group met there (whose arc starts to flow into r's
// engines, or into whose engine r's arc starts to flow), or -1 (shedding
// starts, or an engine frees up). It visits each group's engines and
// clusters in ascending order, as a pass per group would, so a group's
// result is the same; but every group's in one pass over all of them.
func (st *state) groupBreakpoints(g *groups, idle []bool, grad []float64, bp *breakpoints) {
	m, p := st.m, st.cur
	for c := range m.nc {
		bp.root[c] = g.find(c)
		bp.dir[c] = 0
		bp.d[c], bp.by[c] = math.Inf(1), -1
	}
	for r := range m.nc {
		if idle[r] && bp.root[r] == r && grad[r] != 0 {
			bp.dir[r] = -1
			if grad[r] > 0 {
				bp.dir[r] = 1
			}
		}
	}
	owner := func(e int) int { // a cluster sending flow to e, or -1
		lo, hi := p.actStart[e], p.actStart[e+1]
		if lo == hi {
			return -1
		}
		return int(m.slotClu[p.act[lo]])
	}
	// Falling, a capped engine frees up, or another cluster's arc into
	// one of the group's engines starts to take flow.
	for e := range m.ne {
		o := owner(e)
		if o < 0 {
			continue
		}
		r := bp.root[o]
		if bp.dir[r] != -1 {
			continue
		}
		d := bp.d[r]
		if v := p.mu[e] - m.eng[e].d1u; v < d {
			d, bp.by[r] = v, -1
		}
		// Views cut at the engine's end, so that an index below len(clu)
		// needs no bounds check on clu, net and ys (unsigned: a signed
		// one might be negative, and clu[k] kept its check), and the
		// arrays in locals, read once an engine rather than once an arc.
		clu := m.slotClu[:m.eStart[e+1]]
		net, ys := m.slotNet[:len(clu)], st.y[:len(clu)]
		w, root, pi, mu := st.w, bp.root, p.pi, p.mu[e]
		for k := uint(m.eStart[e]); k < uint(len(clu)); k++ {
			c := clu[k]
			if w := w[c]; w > 0 && root[c] != r {
				if gap := mu - (pi[c] - net[k] + ys[k]/w); gap > 0 && gap < d {
					d, bp.by[r] = gap, int(c)
				}
			}
		}
		bp.d[r] = d
	}
	// Rising, shedding starts or an arc into an engine outside the group
	// starts to take flow.
	for c := range m.nc {
		r := bp.root[c]
		if bp.dir[r] != 1 || st.w[c] == 0 {
			continue
		}
		w := st.w[c]
		d := bp.d[r]
		if v := m.penalty - st.ys[c]/w - p.pi[c]; v < d {
			d, bp.by[r] = v, -1
		}
		lo, hi := m.arcs(c)
		for a := lo; a < hi; a++ {
			e := int(m.arcEng[a])
			o := owner(e)
			if o >= 0 && bp.root[o] == r {
				continue
			}
			if gap := m.arcNet[a] + p.mu[e] - st.y[m.arcSlot[a]]/w - p.pi[c]; gap > 0 && gap < d {
				d, bp.by[r] = gap, o
			}
		}
		bp.d[r] = d
	}
}

// groups is a union-find over clusters.
type groups struct{ parent []int }

func newGroups(n int) *groups {
	g := &groups{}
	g.reset(n)
	return g
}

// reset makes g n singletons, reusing its storage.
func (g *groups) reset(n int) {
	g.parent = resize(g.parent, n)
	for i := range g.parent {
		g.parent[i] = i
	}
}

func (g *groups) find(i int) int {
	for g.parent[i] != i {
		g.parent[i] = g.parent[g.parent[i]]
		i = g.parent[i]
	}
	return i
}

// link joins the groups whose roots are r and b under the smaller of the
// two and returns it, and whether they were two groups: union's step
// after its finds, for a caller that joins many members to one group and
// finds that group's root once (newtonWork.join, jumpIdle).
func (g *groups) link(r, b int) (int, bool) {
	switch {
	case b == r:
		return r, false
	case b < r:
		g.parent[r] = b
		return b, true
	default:
		g.parent[b] = r
		return r, true
	}
}

// union joins the groups of i and j under the smaller root, so roots do not
// depend on the order of unions.
func (g *groups) union(i, j int) {
	g.link(g.find(i), g.find(j))
}

// pseudoCurvature replaces a zero diagonal (a cluster whose supply does not
// respond to its price) by |grad|/1.5Δ, where Δ is how far the price must
// move to reach the next breakpoint in the direction the gradient asks for.
func (st *state) pseudoCurvature(nw *newtonWork) {
	n := len(nw.rows)
	p := st.cur
	for i, c := range nw.rows {
		if nw.h[i*n+i] > 1e-12*st.w[c] || p.grad[c] == 0 {
			continue
		}
		d := math.Inf(1)
		if p.grad[c] > 0 {
			d = st.nextEntry(c)
		} else {
			d = st.nextRelease(c)
		}
		if !(d > 0) || math.IsInf(d, 1) {
			d = st.kappa
		}
		nw.h[i*n+i] = math.Abs(p.grad[c]) / (1.5 * d)
	}
}

// nextEntry is how far cluster c's price must rise before another of its
// arcs (or shedding) takes flow.
func (st *state) nextEntry(c int) float64 {
	m, p := st.m, st.cur
	w := st.w[c]
	d := m.penalty - st.ys[c]/w - p.pi[c]
	lo, hi := m.arcs(c)
	for a := lo; a < hi; a++ {
		k := m.arcSlot[a]
		if gap := m.arcNet[a] + p.mu[m.arcEng[a]] - st.y[k]/w - p.pi[c]; gap > 0 {
			d = min(d, gap)
		}
	}
	return d
}

// nextRelease is how far cluster c's price must fall before an engine it
// fills to the load cap drops below the cap.
func (st *state) nextRelease(c int) float64 {
	m, p := st.m, st.cur
	d := math.Inf(1)
	for e := range m.ne {
		f := &m.eng[e]
		if p.lam[e] < f.u {
			continue
		}
		d1u, _ := f.marginal(f.u)
		for _, k := range p.act[p.actStart[e]:p.actStart[e+1]] {
			if int(m.slotClu[k]) == c {
				d = min(d, p.mu[e]-d1u)
			}
		}
	}
	return d
}
