package optimize

import (
	"math"
	"slices"
)

// state is the proximally regularised problem
//
//	min  Σ x·n + Σ_e F_e(λ_e) + P·Σ s + Σ_c (κ/2d_c)·(‖x_c − y_c‖² + (s_c − ys_c)²)
//	s.t. Σ_e x_ce + s_c = d_c,  x, s ≥ 0,  λ_e = Σ_c x_ce ≤ u_e
//
// and its dual over cluster prices π. For fixed π the Lagrangian separates
// by engine (a one-dimensional root, solveEngine) and by cluster shed, so
// the dual is smooth and concave with an explicit Hessian, maximised by
// Newton's method (newton.go). Arc flows are x = w·max(0, b − μ_e) with
// b = π_c − n + y/w and w = d_c/κ; an engine's evaluation skips, in one
// pass, the arcs whose b is below a bound on its price, so only the few
// arcs near the engine's price cost more than a comparison.
type state struct {
	m      *model
	kappa  float64   // proximal strength, ms per request for moving all of a cluster
	w      []float64 // per cluster: d_c/κ = 1/δ_c; 0 when d_c = 0
	y      []float64 // per slot: proximal centre, rps
	ys     []float64 // per cluster: shed proximal centre, rps
	yConst float64   // Σ y²/2w over slots: the dual value's share from arcs without flow
	yZero  bool      // every y is 0: a cold first round
	warm   bool      // started from a previous solution
	churn  bool      // the centre is the previous solution: κ is the churn price

	// ySlots are the slots of the nonzero y when the centre is the
	// previous solution's flows (centreOnPrevious; nil after recentre),
	// in no order until ySorted, which centrePoint sets when it sorts
	// them: a pass over them instead of over every slot.
	ySlots  []int32
	ySorted bool

	// piLo, piHi bound the optimal prices for the current κ (priceBox).
	piLo, piHi []float64

	near        nearLists
	trace       func(format string, a ...any)
	keepCycling bool // see cycleWatch

	mem        *memory // working memory kept between attempts and solves
	cur, trial *point
	arcs       []engineArc // scratch
	on         []float64   // scratch: bidPrices
	slots      []int32     // scratch
}

// point is the dual iterate π and everything the Lagrangian's minimiser
// gives at it.
type point struct {
	pi       []float64 // per cluster price, ms
	s        []float64 // per cluster shed, rps
	lam      []float64 // per engine load, rps
	mu       []float64 // per engine price, ms
	grad     []float64 // per cluster d − s − Σx: the dual gradient
	act      []int32   // slots with flow, by engine
	actX     []float64 // their flows, rps
	actStart []int32   // engine e's flows: act[actStart[e]:actStart[e+1]]
	value    float64   // dual value
}

func newPoint(nc, ne int) *point {
	f := make([]float64, 3*nc+2*ne) // one allocation: a solve makes hundreds of points
	return &point{pi: take(&f, nc), s: take(&f, nc), grad: take(&f, nc), lam: take(&f, ne), mu: take(&f, ne),
		actStart: make([]int32, ne+1)}
}

// addFlow appends flow y on slot k of engine e (the next of act, in
// engine order) and adds it to e's load.
func (p *point) addFlow(e int, k int32, y float64) {
	p.act = append(p.act, k)
	p.actX = append(p.actX, y)
	p.lam[e] += y
}

// take cuts the next n values off *buf, with n as the slice's capacity (an
// append to it reallocates instead of overwriting the next), so that a
// group of vectors takes one allocation.
func take(buf *[]float64, n int) []float64 {
	s := (*buf)[:n:n]
	*buf = (*buf)[n:]
	return s
}

func newState(m *model, mem *memory) *state {
	f := make([]float64, 4*m.nc+len(m.slotArc))
	st := &state{
		m:     m,
		mem:   mem,
		w:     take(&f, m.nc),
		y:     take(&f, len(m.slotArc)),
		ys:    take(&f, m.nc),
		piLo:  take(&f, m.nc),
		piHi:  take(&f, m.nc),
		cur:   mem.reuse(0, m.nc, m.ne),
		yZero: true,
	}
	st.trial = mem.reuse(1, m.nc, m.ne)
	for e := range m.ne {
		st.cur.mu[e] = m.eng[e].a
	}
	return st
}

// setKappa sets the proximal strength and what depends on it.
func (st *state) setKappa(kappa float64) {
	st.kappa = kappa
	for c, d := range st.m.demand {
		if d > 0 {
			st.w[c] = d / kappa
		}
	}
	st.priceBox()
	st.sumCentre()
	st.invalidateLists()
}

// sumCentre recomputes yConst.
func (st *state) sumCentre() {
	sum := 0.0
	for k, y := range st.y {
		if y != 0 {
			sum += y * y / (2 * st.w[st.m.slotClu[k]])
		}
	}
	st.yConst = sum
}

// priceBox bounds each cluster's optimal price. Every flow obeys
// x = y + w·(π − n − μ) with y ≤ d, so y/w ≤ κ and μ ≥ F'(0) = a: below
// min(n + a) − κ the cluster sends nothing, which cannot be optimal with
// demand; and shed s = ys + w·(π − P) reaches d by π = P + κ.
func (st *state) priceBox() {
	m := st.m
	for c, d := range m.demand {
		if d == 0 {
			continue
		}
		lo := m.penalty
		a0, a1 := m.arcs(c)
		for a := a0; a < a1; a++ {
			lo = min(lo, m.arcNet[a]+m.eng[m.arcEng[a]].a)
		}
		st.piLo[c] = lo - st.kappa
		st.piHi[c] = m.penalty + st.kappa
	}
}

// evaluate fills p (whose pi is set) with the Lagrangian minimiser at p.pi,
// the dual value and its gradient. from is a nearby point whose engine
// loads and prices start the per-engine roots.
func (st *state) evaluate(p, from *point) {
	m := st.m
	value := st.yConst
	for c, d := range m.demand {
		p.grad[c] = d
		value += p.pi[c] * d
	}
	useLists := st.listsCover(p.pi, 0)
	st.bidPrices(p.pi)
	ev := st.evaluator(p, useLists)
	for e := range m.ne {
		p.actStart[e] = int32(len(ev.act))
		value += ev.engine(e, from.lam[e], from.mu[e])
	}
	st.arcs, st.slots = ev.arcs, ev.out
	p.act, p.actX = ev.act, ev.actX
	p.actStart[m.ne] = int32(len(p.act))
	for c, w := range st.w {
		if w == 0 {
			p.s[c] = 0
			continue
		}
		s := max(0, st.ys[c]+w*(p.pi[c]-m.penalty))
		p.s[c] = s
		p.grad[c] -= s
		ds := s - st.ys[c]
		value += s*(m.penalty-p.pi[c]) + ds*ds/(2*w)
	}
	p.value = value
}

// evaluator is evaluate's view of a state and a point: the slices every
// engine's evaluation reads, taken out of their structs once an
// evaluation rather than once an engine (a backtest's engines have a few
// arcs each, and building each engine's slotView and reloading the fields
// cost more than its arcs). The arcs are engineSlots's, from the same
// slotArrays: its near list when useLists, else all of its slots.
type evaluator struct {
	m                 *model
	start, slots, clu []int32   // the engines' arcs: start[e]..start[e+1]
	net, y            []float64 // their network times and centres
	yZero             bool
	w, on, pi, grad   []float64 // per cluster
	slotClu           []int32   // per slot (the model's)
	slotNet, slotY    []float64 // per slot (the model's and the centre)
	lam, mu           []float64 // p's, per engine
	arcs              []engineArc
	out               []int32 // the slots of arcs
	act               []int32
	actX              []float64
}

func (st *state) evaluator(p *point, useLists bool) evaluator {
	m := st.m
	ev := evaluator{m: m, yZero: st.yZero, w: st.w, on: st.on, pi: p.pi, grad: p.grad,
		slotClu: m.slotClu, slotNet: m.slotNet, slotY: st.y, lam: p.lam, mu: p.mu,
		arcs: st.arcs, out: st.slots, act: p.act[:0], actX: p.actX[:0]}
	ev.start, ev.slots, ev.clu, ev.net, ev.y = st.slotArrays(useLists)
	return ev
}

// evalMarginMs is how far below its last price an engine's first pass
// looks for arcs; a price that falls further costs a second pass.
const evalMarginMs = 1.0

// engine solves engine e's part of the Lagrangian at p.pi, appends its
// flows to ev.act and ev.actX and returns its value (less the yConst
// share).
func (ev *evaluator) engine(e int, warmL, warmMu float64) float64 {
	f := &ev.m.eng[e]
	tau := max(f.a, warmMu-evalMarginMs)
	lo, hi := ev.start[e], ev.start[e+1]
	var l, mu float64
	for {
		ev.collect(lo, hi, tau)
		l, mu = f.solveEngine(ev.arcs, warmL)
		if mu >= tau || tau <= f.a {
			break
		}
		tau = max(f.a, mu) // flows reach below the first pass: look again
	}
	ev.lam[e], ev.mu[e] = l, mu
	act, actX, grad, pi := ev.act, ev.actX, ev.grad, ev.pi
	arcs, clu, net, y := ev.arcs[:len(ev.out)], ev.slotClu, ev.slotNet, ev.slotY
	value, sum := 0.0, 0.0
	for i, k := range ev.out {
		a := arcs[i]
		if a.b <= mu {
			continue
		}
		x := a.w * (a.b - mu)
		c := clu[k]
		act = append(act, k)
		actX = append(actX, x)
		grad[c] -= x
		yk := y[k]
		value += x*(net[k]-pi[c]) + (x*x-2*x*yk)/(2*a.w)
		sum += x
	}
	ev.act, ev.actX = act, actX
	if sum == 0 {
		ev.lam[e] = 0
		return 0
	}
	return value + f.cost(sum)
}

// collect gathers the arcs lo..hi of the view with b > tau into ev.arcs
// and ev.out.
func (ev *evaluator) collect(lo, hi int32, tau float64) {
	arcs, out := ev.arcs[:0], ev.out[:0]
	// Indexed from lo rather than resliced: an engine has a few arcs, and
	// cutting four slices cost more than their bounds checks.
	clu, net, slots := ev.clu, ev.net, ev.slots
	if ev.yZero {
		// b = π − n, from the prices bidPrices set for p (-Inf for a
		// cluster without weight, which never passes tau). The views cut
		// at hi, so that an index below len(clu) needs no bounds check
		// on clu, net and slots (a cold pass visits every arc; unsigned:
		// a signed one might be negative, and clu[i] kept its check).
		on, w := ev.on, ev.w
		clu = clu[:hi]
		net, slots = net[:len(clu)], slots[:len(clu)]
		for i := uint(lo); i < uint(len(clu)); i++ {
			c := clu[i]
			if b := on[c] - net[i]; b > tau {
				arcs = append(arcs, engineArc{b: b, w: w[c]})
				out = append(out, slots[i])
			}
		}
		ev.arcs, ev.out = arcs, out
		return
	}
	ys, w, pi := ev.y, ev.w, ev.pi
	for i := lo; i < hi; i++ {
		c := clu[i]
		wc := w[c]
		if wc == 0 {
			continue
		}
		b := pi[c] - net[i]
		if y := ys[i]; y != 0 {
			b += y / wc
		}
		if b > tau {
			arcs = append(arcs, engineArc{b: b, w: wc})
			out = append(out, slots[i])
		}
	}
	ev.arcs, ev.out = arcs, out
}

// bidPrices sets and returns st.on: per cluster its price in pi, or -Inf
// when it has no weight (no demand), so that π − n needs no test.
func (st *state) bidPrices(pi []float64) []float64 {
	st.on = resize(st.on, len(pi))
	for c, v := range pi {
		st.on[c] = math.Inf(-1)
		if st.w[c] > 0 {
			st.on[c] = v
		}
	}
	return st.on
}

func (st *state) tracef(format string, a ...any) {
	if st.trace != nil {
		st.trace(format, a...)
	}
}

// maxRelGrad is max over clusters of |d − s − Σx| / d.
func (st *state) maxRelGrad(p *point) float64 {
	r := 0.0
	for c, d := range st.m.demand {
		if d > 0 {
			r = max(r, math.Abs(p.grad[c])/d)
		}
	}
	return r
}

// centrePoint packs the proximal centre (the flows Solve started from) as
// a point with the current prices, for the crossover.
func (st *state) centrePoint() *point {
	m := st.m
	p := newPoint(m.nc, m.ne)
	copy(p.pi, st.cur.pi)
	copy(p.mu, st.cur.mu)
	copy(p.s, st.ys)
	if st.ySlots != nil {
		// The same flows in the same order as the pass over every slot
		// below: the centre's slots ascending are engine by engine.
		if !st.ySorted {
			slices.Sort(st.ySlots)
			st.ySorted = true
		}
		slots, i := st.ySlots, 0
		for e := range m.ne {
			p.actStart[e] = int32(len(p.act))
			for end := m.eStart[e+1]; i < len(slots) && slots[i] < end; i++ {
				k := slots[i]
				if y := st.y[k]; y > 0 {
					p.addFlow(e, k, y)
				}
			}
		}
		p.actStart[m.ne] = int32(len(p.act))
		return p
	}
	for e := range m.ne {
		p.actStart[e] = int32(len(p.act))
		for k := m.eStart[e]; k < m.eStart[e+1]; k++ {
			if y := st.y[k]; y > 0 {
				p.addFlow(e, k, y)
			}
		}
	}
	p.actStart[m.ne] = int32(len(p.act))
	return p
}

// recentre moves the proximal centre to the current flows.
func (st *state) recentre() {
	clear(st.y)
	st.yZero = false
	st.ySlots = nil
	for i, k := range st.cur.act {
		st.y[k] = st.cur.actX[i]
	}
	copy(st.ys, st.cur.s)
	st.invalidateLists()
}
