package optimize

import "math"

// lineSearch looks for the step length t along the Newton direction that
// maximises the dual, which is concave along the ray, so its slope
// φ'(t) = grad(π + t·step)·step falls with t. It tries t = 1, then
// regula falsi on φ' (Illinois variant) inside the bracket where φ' changes
// sign, and accepts the first point with enough ascent (Armijo). Points are
// projected on the box that holds the optimum (priceBox). Near the optimum
// the dual value changes by less than its rounding error, so there a full
// step that halves the demand residual without losing value beyond
// rounding is accepted too.
func (st *state) lineSearch(nw *newtonWork) (float64, bool) {
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
			return t, true
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
	return 0, false
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
