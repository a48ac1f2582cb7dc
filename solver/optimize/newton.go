package optimize

import (
	"math"
	"slices"
)

// newtonWork holds the dense Newton system over clusters with demand.
type newtonWork struct {
	idx      []int     // cluster -> row, or -1
	rows     []int     // row -> cluster
	h        []float64 // n×n, row-major; lower triangle used
	fact     []float64 // h, factorised
	rhs      []float64
	sol      []float64 // per row
	step     []float64 // per cluster
	near     []nearArc // scratch
	soft     []nearArc // scratch
	prev     []float64 // scratch: prices before a step
	blockIdx []int32   // scratch: one engine's rows (addBlock)
	blockW   []float64 // scratch: their weights
	tau      float64   // size of the last step, ms
	nearCap  int       // soft arcs an engine counts: maxNear, more after short steps
	widen    bool      // let nearCap grow and bound steps (exact rounds; not the churn solve)
	reach    float64   // exact rounds: largest price move of a step, ms (trust region)

	coupled             groups // rows an engine couples in H
	sets                int    // groups left in coupled
	order               []int
	blockAt             []int // scratch: counting sort of rows by block
	blockStart          []int32
	sub, subRHS, subSol []float64

	watch cycleWatch
}

func newNewtonWork(m *model) *newtonWork {
	nw := &newtonWork{idx: make([]int, m.nc), step: make([]float64, m.nc), watch: newCycleWatch(m.nc, m.ne)}
	nw.setRows(m)
	return nw
}

// newtonWork returns a newtonWork for m as newNewtonWork makes it, reusing
// the last one's memory when m has as many clusters and engines: the
// scratch is written before it is read, and the cycle watch reads only
// what the current maximize recorded.
func (mem *memory) newtonWork(m *model) *newtonWork {
	nw := mem.newton
	if nw == nil || len(nw.idx) != m.nc || len(nw.watch.lam[0]) != m.ne {
		nw = newNewtonWork(m)
		mem.newton = nw
		return nw
	}
	clear(nw.step)
	nw.tau, nw.widen, nw.reach = 0, false, 0
	nw.setRows(m)
	return nw
}

// setRows numbers the clusters with demand (the system's rows) and sizes
// the system for them, zeroed, with the soft arcs' cap at its start.
func (nw *newtonWork) setRows(m *model) {
	nw.rows, nw.nearCap = nw.rows[:0], maxNear
	for c, d := range m.demand {
		nw.idx[c] = -1
		if d > 0 {
			nw.idx[c] = len(nw.rows)
			nw.rows = append(nw.rows, c)
		}
	}
	n := len(nw.rows)
	if len(nw.h) != n*n || len(nw.sol) != n {
		f := make([]float64, 2*n*n+2*n)
		nw.h, nw.fact, nw.rhs, nw.sol = take(&f, n*n), take(&f, n*n), take(&f, n), take(&f, n)
		return
	}
	clear(nw.h)
	clear(nw.fact)
	clear(nw.rhs)
	clear(nw.sol)
}

// maximize runs Newton's method with a backtracking line search on the dual
// of the restricted problem, from st.cur (whose pi is set), until the
// relative demand residual is at most tol or maxIter steps are taken. It
// returns the number of Newton steps, and whether it stopped on a cycle
// (cycleWatch): then it is where maxIter steps would have left it.
func (st *state) maximize(nw *newtonWork, tol float64, maxIter int) (int, bool) {
	st.evaluate(st.cur, st.cur)
	st.buildLists(st.cur)
	nw.tau = min(st.kappa, firstTauMs)
	nw.reach = 0
	if nw.widen {
		nw.reach = st.kappa
	}
	stalled, builds := 0, 0
	for it := range maxIter {
		if nw.watch.repeats(it, maxIter, st.cur, nw.tau, nw.reach, stalled, builds, nw.nearCap) && !st.keepCycling {
			st.tracef("  step %d: back to an earlier point of a round; stopping where step %d would", it, maxIter)
			return it, true
		}
		res, value := st.maxRelGrad(st.cur), st.cur.value
		if st.trace != nil {
			st.tracef("  step %d: residual %.3g, dual %.15g, τ %.3g", it, res, value, nw.tau)
		}
		if res <= tol {
			return it, false
		}
		if st.jumpIdle() {
			continue
		}
		if !st.newtonStep(nw) {
			return it + 1, false
		}
		before := append(nw.prev[:0], st.cur.pi...)
		nw.prev = before
		t, ok := st.lineSearch(nw)
		if !ok {
			return it + 1, false
		}
		moved := 0.0
		for c, v := range st.cur.pi {
			moved = max(moved, math.Abs(v-before[c]))
		}
		if nw.widen {
			switch {
			case t < shortStep:
				nw.nearCap = min(2*nw.nearCap, maxNearWide)
				nw.reach = reachShrink * moved
			case t == 1:
				nw.nearCap = max(nw.nearCap/2, maxNear)
				nw.reach *= reachGrow
			}
		}
		// τ follows the scale at which the model held: the step taken, or
		// more when the line search cut a long predicted step short (the
		// model missed arcs that far out, so the next one should see them).
		predicted := 0.0
		for _, v := range nw.step {
			predicted = max(predicted, math.Abs(v))
		}
		nw.tau = max(math.Sqrt(moved*min(predicted, st.kappa)), moved, nw.tau/4, 1e-9)
		if !st.listsCover(st.cur.pi, nearMarginMs/2) {
			st.buildLists(st.cur)
			builds++
		}
		// Rounding bounds how far the residual can fall; stop when steps
		// neither gain value nor halve it.
		if st.cur.value-value <= 1e-14*math.Abs(value) && st.maxRelGrad(st.cur) > res/2 {
			if stalled++; stalled == 3 {
				return it + 1, false
			}
		} else {
			stalled = 0
		}
	}
	return maxIter, false
}

// cycleWatch keeps maximize's state at the starts of the last cycleSpan
// iterations: the current point's prices, engine loads and engine prices
// (the rest of the point follows from them), τ, the stall count, how
// many times the near lists were rebuilt, and the soft arcs' cap. An
// iteration is a function of that state alone, so once it returns bit
// for bit to the state of p iterations before, maximize goes round the
// same p points until maxIter. It does, at the rounding floor: the line
// search accepts a full step that halves the residual without losing
// value beyond rounding, the next step goes back, and the stall test,
// which needs steps that do not halve the last residual, is reset every
// other step (p = 2); with the soft arcs' cap doubling after short steps
// and halving after full ones, longer rounds were seen too (a backtest
// solve at ten times the scale ran all 2,000 steps). Stopping on an
// iteration a whole number of rounds before maxIter gives the very point
// the full run ends on, without its steps (up to MaxNewtonSteps of them).
type cycleWatch struct {
	pi, lam, mu              [cycleSpan][]float64
	tau, reach               [cycleSpan]float64
	stalled, builds, nearCap [cycleSpan]int
}

// cycleSpan is the longest round cycleWatch recognises.
const cycleSpan = 8

func newCycleWatch(nc, ne int) cycleWatch {
	var w cycleWatch
	f := make([]float64, cycleSpan*(nc+2*ne))
	for i := range cycleSpan {
		w.pi[i], w.lam[i], w.mu[i] = take(&f, nc), take(&f, ne), take(&f, ne)
	}
	return w
}

// repeats reports whether the state at the start of iteration it is the
// one of iteration it−p for some round p ≤ cycleSpan that divides
// maxIter − it (so that the full run would end on this very state), and
// records it.
func (w *cycleWatch) repeats(it, maxIter int, p *point, tau, reach float64, stalled, builds, nearCap int) bool {
	found := false
	for r := 1; r <= cycleSpan && r <= it && !found; r++ {
		if (maxIter-it)%r != 0 {
			continue
		}
		j := (it - r) % cycleSpan
		found = w.stalled[j] == stalled && w.builds[j] == builds && w.nearCap[j] == nearCap && sameBits(w.tau[j], tau) && sameBits(w.reach[j], reach) &&
			slices.EqualFunc(w.pi[j], p.pi, sameBits) && slices.EqualFunc(w.lam[j], p.lam, sameBits) &&
			slices.EqualFunc(w.mu[j], p.mu, sameBits)
	}
	i := it % cycleSpan
	copy(w.pi[i], p.pi)
	copy(w.lam[i], p.lam)
	copy(w.mu[i], p.mu)
	w.tau[i], w.reach[i], w.stalled[i], w.builds[i], w.nearCap[i] = tau, reach, stalled, builds, nearCap
	return found
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// newtonStep assembles H = −∇²(dual) at st.cur and solves H·step = grad.
// Clusters with no curvature (nothing responds to their price) get a
// pseudo-curvature that moves their price to the nearest breakpoint.
func (st *state) newtonStep(nw *newtonWork) bool {
	n := len(nw.rows)
	clear(nw.h)
	nw.coupled.reset(n)
	nw.sets = n
	st.assembleEngines(nw)
	p := st.cur
	for i, c := range nw.rows {
		if p.s[c] > 0 {
			nw.h[i*n+i] += st.w[c]
		}
		nw.rhs[i] = p.grad[c]
	}
	st.pseudoCurvature(nw)
	if !nw.solveBlocks(n) {
		return false
	}
	for i, c := range nw.rows {
		nw.step[c] = nw.sol[i]
	}
	nw.bound(p.grad)
	return true
}

// bound keeps every price's move within nw.reach (exact rounds): a
// trust region over the prices, each price on its own. Cold, the first
// round's Hessian is nearly singular along the prices of clusters whose
// engines sit at their caps or that few soft arcs hold: Newton's step
// sends such a price hundreds of ms (once 1e16 ms) while the line search
// finds the dual falling after a few, and cuts the whole step, every
// other cluster's with it, to a sliver; the next step does the same
// (100x1000 slack: steps alternated between 5% and full, the predicted
// move 100-140 ms; 300x3000 slack crawled 25 steps at 0.6%). Clipping
// those prices lets the others take their full Newton step. The region
// starts at κ, shrinks to reachShrink times the move after a step the
// line search cut below shortStep, and grows reachGrow-fold after a full
// step. A clipped step that is no ascent direction is scaled instead.
func (nw *newtonWork) bound(grad []float64) {
	r := nw.reach
	if r <= 0 {
		return
	}
	big := 0.0
	for _, v := range nw.step {
		big = max(big, math.Abs(v))
	}
	if big <= r {
		return
	}
	ascent := 0.0
	for c, v := range nw.step {
		v = min(max(v, -r), r)
		ascent += grad[c] * v
	}
	if ascent > 0 {
		for c, v := range nw.step {
			nw.step[c] = min(max(v, -r), r)
		}
		return
	}
	for c, v := range nw.step {
		nw.step[c] = v * (r / big)
	}
}

// reachShrink and reachGrow steer the trust region of exact rounds
// (newtonWork.bound).
const (
	reachShrink = 4
	reachGrow   = 2
)

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
	m, p := st.m, st.cur
	cut := nw.tau * softCut
	useLists := st.listsCover(p.pi, cut)
	on := st.bidPrices(p.pi)
	for e := range m.ne {
		near, soft := nw.near[:0], nw.soft[:0]
		v := st.engineSlots(e, useLists)
		if st.yZero {
			// The same arcs as below, for a centre at zero: b = π − n, or
			// -Inf for a cluster without weight (z = +Inf: skipped).
			mu, net := p.mu[e], v.net[:len(v.clu)] // (no bounds check on net[i])
			for i, c := range v.clu {
				z := mu - (on[c] - net[i])
				switch {
				case z >= cut:
				case z < 0:
					near = append(near, nearArc{c, st.w[c], 1})
				case len(soft) < nw.nearCap || z <= soft[nw.nearCap-1].r:
					soft = keepHeaviest(soft, nearArc{c, st.w[c], z}, nw.nearCap)
				}
			}
			v.clu = nil
		}
		for i, c := range v.clu {
			w := st.w[c]
			if w == 0 {
				continue
			}
			b := p.pi[c] - v.net[i]
			if y := v.y[i]; y != 0 { // y/w is +0 otherwise: b as it is
				b += y / w
			}
			z := p.mu[e] - b
			switch {
			case z < 0:
				near = append(near, nearArc{c, w, 1})
			case z < cut && (len(soft) < nw.nearCap || z <= soft[nw.nearCap-1].r):
				// (a full list keeps a only if it is nearer than the last)
				soft = keepHeaviest(soft, nearArc{c, w, z}, nw.nearCap)
			}
		}
		for _, a := range soft {
			r := math.Exp(-a.r / nw.tau)
			near = append(near, nearArc{a.c, a.w * r, r})
		}
		nw.near, nw.soft = near, soft
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
		nw.addBlock(near, beta)
	}
}

// addBlock adds one engine's block diag(w) − β·w·wᵀ over its arcs near to
// the lower triangle of H, and joins their rows in nw.coupled. Each entry
// gets one term per engine, so the order within the block does not change
// H: the arcs are sorted by row to walk the triangle directly.
func (nw *newtonWork) addBlock(near []nearArc, beta float64) {
	n := len(nw.rows)
	rows, ws := nw.blockIdx[:0], nw.blockW[:0]
	for _, a := range near {
		i := int32(nw.idx[a.c])
		k := len(rows)
		rows, ws = append(rows, i), append(ws, a.w)
		for ; k > 0 && rows[k-1] > i; k-- {
			rows[k], ws[k] = rows[k-1], ws[k-1]
		}
		rows[k], ws[k] = i, a.w
	}
	nw.blockIdx, nw.blockW = rows, ws
	nw.join(rows)
	for ia, i := range rows {
		aw := ws[ia]
		bw := beta * aw
		row := nw.h[int(i)*n:]
		row[i] += aw - bw*aw
		for jb, j := range rows[:ia] {
			row[j] -= bw * ws[jb]
		}
	}
}

// join puts rows, sorted ascending, in one group of nw.coupled. Only
// the groups' roots are read (solveBlocks), and a root is its group's
// lowest row whatever the order of joins, so join finds the first row's
// root once, and nothing once every row is in one group (nw.sets, the
// groups left), as in most fleets after a few engines.
func (nw *newtonWork) join(rows []int32) {
	if nw.sets <= 1 {
		return
	}
	g := &nw.coupled
	r := g.find(int(rows[0]))
	for _, i := range rows[1:] {
		var joined bool
		if r, joined = g.link(r, g.find(int(i))); joined {
			nw.sets--
		}
	}
}

// softCut is how many τ below flowing an arc still counts in the Hessian,
// and firstTauMs the τ of a round's first step.
const (
	softCut    = 3
	firstTauMs = 1.0
)

// maxNear caps the arcs per engine the Hessian counts besides those that
// carry flow: the pairs cost grows with its square. 4 rather than 16
// (issue 15, fourth pass): BenchmarkSolveRandom's 48 random 100x1000
// fleets took 5-15% less CPU (medians of five alternating runs), the
// steps cheaper and, but in slack, the most steps fewer; on the single
// fleets of BenchmarkSolve the difference was within the machine's noise
// either way. The tie method finishes from the round's point regardless.
const maxNear = 4

// maxNearWide and shortStep: after a line search that took less than
// shortStep of the Newton step, the next Hessian counts twice as many
// soft arcs an engine, up to maxNearWide; after a full step, half as
// many, down to maxNear (exact rounds only, newtonWork.widen). A short
// step means the model missed arcs that started to flow within it. On
// random 300x3000 fleets, where an engine has ten or more clusters
// within a few ms of each other, four soft arcs left the model blind to
// the rest: Newton crawled for hundreds of steps with the line search
// taking 0.2-0.5% of each (772 steps and 11.7 s of CPU on one fleet,
// 396 and 5.5 s on another; 97 and 87 with the cap widening, 2.0 and
// 1.3 s). 16 for every solve cured those two but cost 20-30% at
// 100x1000, where 4 was chosen (fourth pass); widening only where the
// steps fall short leaves the 100x1000 fleets' steps as they were, or
// nearly.
const (
	maxNearWide = 64
	shortStep   = 0.1
)

// keepHeaviest adds a to soft, which holds at most limit arcs sorted by
// price gap z (in r) ascending, lower cluster first on ties: the arcs
// nearest to flowing, which weigh most.
func keepHeaviest(soft []nearArc, a nearArc, limit int) []nearArc {
	less := func(x, y nearArc) bool { return x.r < y.r || (x.r == y.r && x.c < y.c) }
	if len(soft) == limit {
		if !less(a, soft[limit-1]) {
			return soft
		}
		soft = soft[:limit-1]
	}
	i := len(soft)
	soft = append(soft, a)
	for i > 0 && less(a, soft[i-1]) {
		soft[i] = soft[i-1]
		i--
	}
	soft[i] = a
	return soft
}

type nearArc struct {
	c int32
	w float64 // weight in the Hessian
	r float64 // w over the cluster's full weight (1 when the arc flows); the price gap z while selecting
}

// cholRows4 sets column j of the four rows of L starting at a (rows n
// apart) from row j's first j entries and diagonal d. Each row sums its
// products in the same order as one row at a time would, so L is
// bit-identical; four independent sums keep the floating-point adder busy
// where one sum waits on its last addition.
func cholRows4(a []float64, n int, rowJ []float64, j int, d float64) {
	rowJ = rowJ[:j]
	r0, r1, r2, r3 := a[:j+1], a[n:n+j+1], a[2*n:2*n+j+1], a[3*n:3*n+j+1]
	s0, s1, s2, s3 := r0[j], r1[j], r2[j], r3[j]
	// (equal lengths let the compiler drop the bounds checks)
	r0, r1, r2, r3 = r0[:len(rowJ)], r1[:len(rowJ)], r2[:len(rowJ)], r3[:len(rowJ)]
	for k, v := range rowJ {
		s0 -= r0[k] * v
		s1 -= r1[k] * v
		s2 -= r2[k] * v
		s3 -= r3[k] * v
	}
	a[j], a[n+j], a[2*n+j], a[3*n+j] = s0/d, s1/d, s2/d, s3/d
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
		i := j + 1
		for ; i+4 <= n; i += 4 {
			cholRows4(a[i*n:], n, rowJ, j, d)
		}
		for ; i < n; i++ {
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
