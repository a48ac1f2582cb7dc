package optimize

import "math"

// newtonWork holds the dense Newton system over clusters with demand.
type newtonWork struct {
	idx  []int     // cluster -> row, or -1
	rows []int     // row -> cluster
	h    []float64 // n×n, row-major; lower triangle used
	fact []float64 // h, factorised
	rhs  []float64
	sol  []float64 // per row
	step []float64 // per cluster
	near []nearArc // scratch
	prev []float64 // scratch: prices before a step
	tau  float64   // size of the last step, ms
}

func newNewtonWork(m *model) *newtonWork {
	nw := &newtonWork{idx: make([]int, m.nc), step: make([]float64, m.nc)}
	for c, d := range m.demand {
		nw.idx[c] = -1
		if d > 0 {
			nw.idx[c] = len(nw.rows)
			nw.rows = append(nw.rows, c)
		}
	}
	n := len(nw.rows)
	nw.h = make([]float64, n*n)
	nw.fact = make([]float64, n*n)
	nw.rhs = make([]float64, n)
	nw.sol = make([]float64, n)
	return nw
}

// maximize runs Newton's method with a backtracking line search on the dual
// of the restricted problem, from st.cur (whose pi is set), until the
// relative demand residual is at most tol or maxIter steps are taken. It
// returns the number of Newton steps.
func (st *state) maximize(nw *newtonWork, tol float64, maxIter int) int {
	st.evaluate(st.cur, st.cur)
	st.buildLists(st.cur)
	nw.tau = min(st.kappa, firstTauMs)
	stalled := 0
	for it := range maxIter {
		res, value := st.maxRelGrad(st.cur), st.cur.value
		if st.trace != nil {
			worst := 0
			for c, d := range st.m.demand {
				if d > 0 && math.Abs(st.cur.grad[c])/d >= res {
					worst = c
				}
			}
			st.tracef("  step %d: residual %.3g (cluster %d: grad %.4g price %.6g shed %.4g) value %.15g", it, res, worst, st.cur.grad[worst], st.cur.pi[worst], st.cur.s[worst], value)
		}
		if res <= tol {
			return it
		}
		if st.jumpIdle() {
			continue
		}
		if !st.newtonStep(nw) {
			return it + 1
		}
		before := append(nw.prev[:0], st.cur.pi...)
		nw.prev = before
		if !st.lineSearch(nw) {
			return it + 1
		}
		moved := 0.0
		for c, v := range st.cur.pi {
			moved = max(moved, math.Abs(v-before[c]))
		}
		nw.tau = max(moved, nw.tau/4, 1e-9)
		if !st.listsCover(st.cur.pi, nearMarginMs/2) {
			st.buildLists(st.cur)
		}
		// Rounding bounds how far the residual can fall; stop when steps
		// neither gain value nor halve it.
		if st.cur.value-value <= 1e-14*math.Abs(value) && st.maxRelGrad(st.cur) > res/2 {
			if stalled++; stalled == 3 {
				return it + 1
			}
		} else {
			stalled = 0
		}
	}
	return maxIter
}

// newtonStep assembles H = −∇²(dual) at st.cur and solves H·step = grad.
// Clusters with no curvature (nothing responds to their price) get a
// pseudo-curvature that moves their price to the nearest breakpoint.
func (st *state) newtonStep(nw *newtonWork) bool {
	n := len(nw.rows)
	clear(nw.h)
	st.assembleEngines(nw)
	p := st.cur
	for i, c := range nw.rows {
		if p.s[c] > 0 {
			nw.h[i*n+i] += st.w[c]
		}
		nw.rhs[i] = p.grad[c]
	}
	st.pseudoCurvature(nw)
	for ridge := 0.0; ; {
		copy(nw.fact, nw.h)
		if cholSolve(nw.fact, nw.rhs, n, ridge, nw.sol) {
			break
		}
		if ridge == 0 {
			ridge = 1e-12
		} else if ridge *= 100; ridge > 1 {
			return false
		}
	}
	for i, c := range nw.rows {
		nw.step[c] = nw.sol[i]
	}
	return true
}

// assembleEngines adds each engine's block −∂x/∂π to H. With arcs A, S =
// Σ_A w, and β = F”/(1 + F”·S) (β = 1/S at the load cap), the block is
// diag(w_A) − β·w_A·w_Aᵀ. A are the arcs that carry flow, plus arcs about
// to: an arc a price gap z = μ − b > 0 short of flowing counts with weight
// w·exp(−z/τ), where τ is the size of the last step. Without them the
// model ignores the many arcs a real fleet holds within a few ms of its
// prices; its steps then run into them and the line search cuts every
// step to a sliver. Near the optimum steps shrink, τ with them, and the
// model becomes the exact generalised Hessian again.
func (st *state) assembleEngines(nw *newtonWork) {
	n := len(nw.rows)
	m, p := st.m, st.cur
	cut := nw.tau * softCut
	useLists := st.listsCover(p.pi, cut)
	for e := range m.ne {
		near := nw.near[:0]
		for _, k := range st.engineSlots(e, useLists) {
			c := m.slotClu[k]
			w := st.w[c]
			if w == 0 {
				continue
			}
			z := p.mu[e] - (p.pi[c] - m.slotNet[k] + st.y[k]/w)
			switch {
			case z < 0:
				near = append(near, nearArc{c, w})
			case z < cut:
				near = append(near, nearArc{c, w * math.Exp(-z/nw.tau)})
			}
		}
		nw.near = near
		if len(near) == 0 {
			continue
		}
		sum := 0.0
		for _, a := range near {
			sum += a.w
		}
		f := &m.eng[e]
		beta := 1 / sum
		if p.lam[e] < f.u {
			_, d2 := f.marginal(p.lam[e])
			beta = d2 / (1 + d2*sum)
		}
		for _, a := range near {
			i := nw.idx[a.c]
			nw.h[i*n+i] += a.w - beta*a.w*a.w
			for _, b := range near {
				if j := nw.idx[b.c]; j < i {
					nw.h[i*n+j] -= beta * a.w * b.w
				}
			}
		}
	}
}

// softCut is how many τ below flowing an arc still counts in the Hessian,
// and firstTauMs the τ of a round's first step.
const (
	softCut    = 3
	firstTauMs = 1.0
)

type nearArc struct {
	c int32
	w float64
}

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
	for e := range m.ne {
		act := p.act[p.actStart[e]:p.actStart[e+1]]
		for _, k := range act[min(1, len(act)):] {
			g.union(int(m.slotClu[act[0]]), int(m.slotClu[k]))
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
	moved := false
	copy(st.trial.pi, p.pi)
	for r := range m.nc {
		if !idle[r] || g.find(r) != r || grad[r] == 0 {
			continue
		}
		d := st.groupBreakpoint(g, r, grad[r] > 0)
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

// groupBreakpoint is how far the prices of idle group r must rise (up) or
// fall to reach its next breakpoint.
func (st *state) groupBreakpoint(g *groups, r int, up bool) float64 {
	m, p := st.m, st.cur
	inGroup := func(e int) bool {
		lo, hi := p.actStart[e], p.actStart[e+1]
		return lo < hi && g.find(int(m.slotClu[p.act[lo]])) == r
	}
	d := math.Inf(1)
	if !up {
		// Falling, a capped engine frees up, or another cluster's arc into
		// one of the group's engines starts to take flow.
		for e := range m.ne {
			if !inGroup(e) {
				continue
			}
			d = min(d, p.mu[e]-m.eng[e].d1u)
			for k := m.eStart[e]; k < m.eStart[e+1]; k++ {
				c := m.slotClu[k]
				if w := st.w[c]; w > 0 && g.find(int(c)) != r {
					if gap := p.mu[e] - (p.pi[c] - m.slotNet[k] + st.y[k]/w); gap > 0 {
						d = min(d, gap)
					}
				}
			}
		}
		return d
	}
	for c := range m.nc {
		if g.find(c) != r || st.w[c] == 0 {
			continue
		}
		w := st.w[c]
		d = min(d, m.penalty-st.ys[c]/w-p.pi[c])
		lo, hi := m.arcs(c)
		for a := lo; a < hi; a++ {
			e := int(m.arcEng[a])
			if inGroup(e) {
				continue
			}
			if gap := m.arcNet[a] + p.mu[e] - st.y[m.arcSlot[a]]/w - p.pi[c]; gap > 0 {
				d = min(d, gap)
			}
		}
	}
	return d
}

// groups is a union-find over clusters.
type groups struct{ parent []int }

func newGroups(n int) *groups {
	g := &groups{parent: make([]int, n)}
	for i := range g.parent {
		g.parent[i] = i
	}
	return g
}

func (g *groups) find(i int) int {
	for g.parent[i] != i {
		g.parent[i] = g.parent[g.parent[i]]
		i = g.parent[i]
	}
	return i
}

// union joins the groups of i and j under the smaller root, so roots do not
// depend on the order of unions.
func (g *groups) union(i, j int) {
	a, b := g.find(i), g.find(j)
	if a > b {
		a, b = b, a
	}
	g.parent[b] = a
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

// lineSearch looks for the step length t along the Newton direction that
// maximises the dual, which is concave along the ray, so its slope
// φ'(t) = grad(π + t·step)·step falls with t. It tries t = 1, then
// regula falsi on φ' (Illinois variant) inside the bracket where φ' changes
// sign, and accepts the first point with enough ascent (Armijo). Points are
// projected on the box that holds the optimum (priceBox). Near the optimum
// the dual value changes by less than its rounding error, so there a full
// step that halves the demand residual without losing value beyond
// rounding is accepted too.
func (st *state) lineSearch(nw *newtonWork) bool {
	cur := st.cur
	res0 := st.maxRelGrad(cur)
	d0 := dot(cur.grad, nw.step)
	tLo, dLo := 0.0, d0
	tHi, dHi := math.Inf(1), 0.0
	t := 1.0
	side := 0
	for range 40 {
		tr, slope := st.tryStep(nw, t)
		ok := tr.value >= cur.value+1e-4*slope
		if !ok && t == 1 && res0 < 1e-6 {
			ok = st.maxRelGrad(tr) < 0.5*res0 && tr.value >= cur.value-1e-13*math.Abs(cur.value)
		}
		if ok {
			st.cur, st.trial = tr, cur
			return true
		}
		dt := dot(tr.grad, nw.step)
		if dt > 0 && tr.value >= cur.value {
			tLo, dLo = t, dt
			if side == 1 {
				dHi /= 2
			}
			side = 1
		} else {
			tHi, dHi = t, min(dt, -1e-300)
			if side == -1 {
				dLo /= 2
			}
			side = -1
		}
		if math.IsInf(tHi, 1) {
			t *= 2
			continue
		}
		t = tLo + dLo*(tHi-tLo)/(dLo-dHi)
		if !(t > tLo && t < tHi) || tHi-tLo < 1e-12*tHi {
			t = tLo + (tHi-tLo)/2
		}
	}
	return false
}

// tryStep evaluates π + t·step, projected on the price box, into st.trial
// and returns it with the ascent the gradient predicts for the move.
func (st *state) tryStep(nw *newtonWork, t float64) (*point, float64) {
	cur, tr := st.cur, st.trial
	slope := 0.0
	for c := range cur.pi {
		v := cur.pi[c] + t*nw.step[c]
		if st.w[c] > 0 {
			v = min(max(v, st.piLo[c]), st.piHi[c])
		}
		tr.pi[c] = v
		slope += cur.grad[c] * (v - cur.pi[c])
	}
	st.evaluate(tr, cur)
	return tr, slope
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// cholSolve solves (A + ridge·diag(A))·x = b into x for symmetric positive
// definite A given by its lower triangle (n×n row-major, overwritten). It
// reports false when A is not positive definite enough.
func cholSolve(a, b []float64, n int, ridge float64, x []float64) bool {
	if ridge > 0 {
		for i := range n {
			a[i*n+i] *= 1 + ridge
		}
	}
	for j := range n {
		rowJ := a[j*n : j*n+j+1]
		d := rowJ[j]
		for k := range j {
			d -= rowJ[k] * rowJ[k]
		}
		if !(d > 1e-300) {
			return false
		}
		d = math.Sqrt(d)
		rowJ[j] = d
		for i := j + 1; i < n; i++ {
			rowI := a[i*n : i*n+j+1]
			s := rowI[j]
			for k := range j {
				s -= rowI[k] * rowJ[k]
			}
			rowI[j] = s / d
		}
	}
	for i := range n {
		s := b[i]
		for k := range i {
			s -= a[i*n+k] * x[k]
		}
		x[i] = s / a[i*n+i]
	}
	for i := n - 1; i >= 0; i-- {
		s := x[i]
		for k := i + 1; k < n; k++ {
			s -= a[k*n+i] * x[k]
		}
		x[i] = s / a[i*n+i]
	}
	return true
}
