package optimize

import "math"

// certificate is a feasible solution and a bound on how far from optimal
// it can be, self-contained so the best one can outlive later rounds.
// Costs are totals in rps·ms (divide by total demand for ms).
type certificate struct {
	arcs []int32   // model arcs with flow, ascending by engine then cluster
	flow []float64 // their flows, repaired to exact feasibility
	pi   []float64 // per cluster price
	mu   []float64 // per engine price
	s    []float64 // per cluster shed
	lam  []float64 // per engine load
	obj  float64   // latency objective of (x, s)
	reg  float64   // churn term of (x, s); 0 in the exact solve
	dual float64   // lower bound on the optimum of obj + reg
	gap  float64   // (obj + reg − dual) / (obj + reg)
	kkt  float64   // largest KKT violation, ms
}

// repair makes the current flows exactly feasible and packs them into a
// certificate: it scales down any engine above its load cap and any
// cluster sending more than its demand; a cluster short of its demand
// tops up its used routes where engines have headroom, and sheds the rest
// (or all of it when it is shedding anyway). The changes are of the order
// of the solver's residual.
func (st *state) repair() certificate {
	m, p := st.m, st.cur
	x := append([]float64(nil), p.actX...)
	ct := certificate{
		s: append([]float64(nil), p.s...), lam: make([]float64, m.ne),
		pi: append([]float64(nil), p.pi...), mu: append([]float64(nil), p.mu...),
	}
	sent := make([]float64, m.nc)
	for e := range m.ne {
		lo, hi := p.actStart[e], p.actStart[e+1]
		sum := 0.0
		for i := lo; i < hi; i++ {
			sum += x[i]
		}
		if u := m.eng[e].u; sum > u {
			for i := lo; i < hi; i++ {
				x[i] *= u / sum
			}
			sum = u
		}
		ct.lam[e] = sum
		for i := lo; i < hi; i++ {
			sent[m.slotClu[p.act[i]]] += x[i]
		}
	}
	short := make([]float64, m.nc)
	scale := make([]float64, m.nc)
	for c, d := range m.demand {
		scale[c] = 1
		switch tot := sent[c] + ct.s[c]; {
		case tot > d:
			scale[c] = d / tot
			ct.s[c] *= scale[c]
		case ct.s[c] > 0 || p.pi[c] >= m.penalty:
			ct.s[c] += d - tot
		default:
			short[c] = d - tot
		}
	}
	for e := range m.ne {
		u := m.eng[e].u
		for i := p.actStart[e]; i < p.actStart[e+1]; i++ {
			c := m.slotClu[p.act[i]]
			x[i] *= scale[c]
			if short[c] > 0 {
				add := min(short[c], max(0, u-ct.lam[e]))
				x[i] += add
				ct.lam[e] += add
				short[c] -= add
			}
		}
	}
	for c, v := range short {
		ct.s[c] += v
	}
	st.primalCost(&ct, x)
	return ct
}

// primalCost fills ct's loads, latency objective and churn term from the
// flows x of the current point's active slots, and packs them.
func (st *state) primalCost(ct *certificate, x []float64) {
	m, p := st.m, st.cur
	obj, reg := 0.0, 0.0
	for e := range m.ne {
		sum := 0.0
		for i := p.actStart[e]; i < p.actStart[e+1]; i++ {
			k := p.act[i]
			sum += x[i]
			obj += x[i] * m.slotNet[k]
			ct.arcs = append(ct.arcs, m.slotArc[k])
			ct.flow = append(ct.flow, x[i])
		}
		ct.lam[e] = sum
		obj += m.eng[e].cost(sum)
	}
	if st.churn {
		reg = st.churnCost(ct, x)
	}
	for c := range m.demand {
		obj += m.penalty * ct.s[c]
	}
	ct.obj = obj
	ct.reg = reg
}

// churnCost is Σ (κ/2d)·(‖x − y‖² + (s − ys)²) for the flows x of the
// current point's active slots.
func (st *state) churnCost(ct *certificate, x []float64) float64 {
	m, p := st.m, st.cur
	reg := 2 * st.yConst // Σ y²/w
	for i, k := range p.act {
		y := st.y[k]
		reg += (x[i]*x[i] - 2*x[i]*y) / st.w[m.slotClu[k]]
	}
	for c, w := range st.w {
		if w > 0 {
			ds := ct.s[c] - st.ys[c]
			reg += ds * ds / w
		}
	}
	return reg / 2
}

// certifyExact certifies the current point for the original problem: the
// primal is the repaired flows, the bound is the Lagrangian dual at the
// current prices (clipped to the shed penalty) over every arc of the model.
func (st *state) certifyExact() certificate {
	ct := st.repair()
	ct.dual = st.dualBound(st.cur.pi)
	ct.gap = relGap(ct.obj, ct.dual)
	ct.kkt = st.kktResidual(false)
	return ct
}

// certifyProximal certifies the current point for the churn-regularised
// problem, whose dual value the last evaluation computed.
func (st *state) certifyProximal() certificate {
	ct := st.repair()
	ct.dual = st.cur.value
	ct.gap = relGap(ct.obj+ct.reg, ct.dual)
	ct.kkt = st.kktResidual(true)
	return ct
}

func relGap(primal, dual float64) float64 {
	if primal <= 0 {
		return max(0, -dual)
	}
	return max(0, (primal-dual)/primal)
}

// dualBound is the Lagrangian dual of the original problem at prices π
// (clipped to the shed penalty; clusters without demand play no part):
//
//	Σ_c π_c·d_c − Σ_e F*_e(max_c(π_c − n_ce)),
//
// a lower bound on the optimal total cost for any π.
func (st *state) dualBound(pi []float64) float64 {
	m := st.m
	v := make([]float64, m.ne)
	for e := range v {
		v[e] = math.Inf(-1)
	}
	bound := 0.0
	for c, d := range m.demand {
		if d == 0 {
			continue
		}
		pc := min(pi[c], m.penalty)
		bound += pc * d
		lo, hi := m.arcs(c)
		// (locals: the stores to v made the compiler load the fields
		// again for every arc)
		arcEng, arcNet := m.arcEng[lo:hi], m.arcNet[lo:hi]
		arcNet = arcNet[:len(arcEng)]
		for a, e := range arcEng {
			if b := pc - arcNet[a]; b > v[e] {
				v[e] = b // (a compare, not max: bids are never NaN, and ±0 alike fail v > a ≥ 0 below)
			}
		}
	}
	for e := range m.ne {
		if v[e] > m.eng[e].a {
			bound -= m.eng[e].conjugate(v[e])
		}
	}
	return bound
}

// kktResidual is the largest violation, in ms, of the optimality
// conditions at the current point: an arc that carries flow must have
// reduced cost zero and no arc may have negative reduced cost, likewise
// the shed option, and an engine at its cap must be priced at least at its
// marginal latency there. With prox, the conditions are those of the
// churn-regularised problem; without, of the original one.
func (st *state) kktResidual(prox bool) float64 {
	m, p := st.m, st.cur
	worst := 0.0
	// (slices in locals: Go loads a field again in every pass of a loop)
	slotClu, slotNet, w, pi, y, act, actX := m.slotClu, m.slotNet, st.w, p.pi, st.y, p.act, p.actX
	for e := range m.ne {
		f := &m.eng[e]
		if p.lam[e] >= f.u {
			d1u, _ := f.marginal(f.u)
			worst = max(worst, d1u-p.mu[e])
		}
		next, end, mu := p.actStart[e], p.actStart[e+1], p.mu[e] // actives are in slot order
		lo, hi := m.eStart[e], m.eStart[e+1]
		if !prox {
			// The engine's slots in order, as below: the runs without
			// flow between its actives in a pass of their own
			// (worstIdle), then each active.
			k := lo
			for ; next < end; next++ {
				a := act[next]
				worst = worstIdle(worst, mu, slotClu[k:a], slotNet[k:a], w, pi)
				if c := slotClu[a]; w[c] != 0 {
					if r := math.Abs(slotNet[a] + mu - pi[c]); r > worst {
						worst = r
					}
				}
				k = a + 1
			}
			worst = worstIdle(worst, mu, slotClu[k:hi], slotNet[k:hi], w, pi)
			continue
		}
		for k := lo; k < hi; k++ {
			x, used := 0.0, false
			if next < end && act[next] == k {
				x, used = actX[next], true
				next++
			}
			c := slotClu[k]
			if w[c] == 0 {
				continue
			}
			r := slotNet[k] + mu - pi[c]
			if prox {
				r += (x - y[k]) / w[c]
			}
			// (compares, not max: no NaN here, and worst starts at +0, so
			// max's ordering of signed zeros gives the same bits)
			if used {
				r = math.Abs(r)
			} else {
				r = -r
			}
			if r > worst {
				worst = r
			}
		}
	}
	for c, w := range st.w {
		if w == 0 {
			continue
		}
		r := m.penalty - p.pi[c]
		if prox {
			r += (p.s[c] - st.ys[c]) / w
		}
		if p.s[c] > 0 {
			worst = max(worst, math.Abs(r))
		} else {
			worst = max(worst, -r)
		}
	}
	return worst
}

// worstIdle is kktResidual's largest violation over slots without flow
// (clusters clu, network ms net) of an engine priced mu, from worst on:
// a negative reduced cost.
func worstIdle(worst, mu float64, clu []int32, net, w, pi []float64) float64 {
	net = net[:len(clu)]
	for i, c := range clu {
		if w[c] == 0 {
			continue
		}
		r := net[i] + mu - pi[c]
		if r = -r; r > worst {
			worst = r
		}
	}
	return worst
}
