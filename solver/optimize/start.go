package optimize

import (
	"math"
	"slices"
)

// previous is Options.Previous mapped onto the model's indices.
type previous struct {
	arcs  []int32   // model arcs the previous solution used, ascending
	w     []float64 // their weights
	start []int     // arcs of cluster c: arcs[start[c]:start[c+1]]
	lost  []float64 // per cluster weight on engines it can no longer use
	shed  []float64 // per cluster shed fraction
	pi    []float64 // per cluster price, NaN when unknown
	mu    []float64 // per engine price, NaN when unknown
	known []bool    // per cluster: the previous solution had it
}

// warmStart maps a previous solution onto m, or returns nil.
func warmStart(p *Problem, m *model, s *Solution) *previous {
	if s == nil {
		return nil
	}
	engIndex := make(map[string]int32, m.ne)
	for i, e := range p.Engines {
		engIndex[e.Name] = int32(i)
	}
	pv := &previous{
		start: make([]int, m.nc+1), lost: make([]float64, m.nc),
		shed: make([]float64, m.nc), pi: make([]float64, m.nc), known: make([]bool, m.nc),
		mu: make([]float64, m.ne),
	}
	for e, en := range p.Engines {
		v, ok := s.EnginePriceMs[en.Name]
		pv.mu[e] = finiteOrNaN(v, ok)
	}
	for c, cl := range p.Clusters {
		pv.start[c+1] = pv.start[c]
		v, ok := s.ClusterPriceMs[cl.Name]
		pv.pi[c] = finiteOrNaN(v, ok)
		row, ok := s.Weights[cl.Name]
		if !ok {
			continue
		}
		pv.known[c] = true
		pv.shed[c] = clamp01(s.ShedFraction[cl.Name])
		lo, hi := m.arcs(c)
		for _, name := range sortedKeys(row) {
			w := clamp01(row[name])
			if w == 0 {
				continue
			}
			e, ok := engIndex[name]
			a, found := slices.BinarySearch(m.arcEng[lo:hi], e)
			if !ok || !found {
				pv.lost[c] += w
				continue
			}
			pv.arcs = append(pv.arcs, int32(lo+a))
			pv.w = append(pv.w, w)
			pv.start[c+1]++
		}
	}
	return pv
}

// finiteOrNaN is v when present and finite, else NaN (unknown).
func finiteOrNaN(v float64, present bool) float64 {
	if !present || math.IsInf(v, 0) {
		return math.NaN()
	}
	return v
}

func clamp01(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return min(v, 1)
}

// start sets the first prices, engine loads and proximal centre.
//
// Cold, every engine starts at the load where all engines share one price
// and carry the demand together (clearingLoads), priced at that clearing
// price, or at F'(λ) where that is higher (an engine whose F'(0) is above
// it carries nothing); a cluster's price starts at its least entry price
// n + μ, as at an equilibrium, and the centre is zero (the first round is
// a plain Tikhonov step; later rounds recentre). An engine at its load
// cap is priced at the clearing price, not at F'(u): the difference is
// the cap's shadow price, up to 2,400 ms on the benchmark fleets, and
// with F'(u) every cluster's cheapest route went through such an engine,
// so the start sat 1,600-2,500 ms below the first round's prices (now
// within ±150 ms; issue 15, sixth pass: 33 to 17 Newton steps on the
// 100x1000 slack fleet, with the trust region of newtonWork.bound).
//
// When the demand is at least the fleet's load cap, the fleet must shed,
// and clusters start at the shed penalty P instead: the clusters that
// shed are at P at the optimum, every engine they reach is priced at
// least P less their network time to it, so a cluster served by such an
// engine is priced within the network times' spread below P. From the
// least entry prices, thousands of ms below, groups of clusters whose
// engines are all at their caps had to climb most of the way (one at a
// time they leapfrogged: 721 Newton steps on one random 100x1000 fleet
// at 105% load; jumpIdle now moves such groups together, and this start
// still halves the most steps on 12 such fleets, 59 to 25). Starting at
// P, the clusters that need not shed fall.
//
// Per-cluster water-filling was tried as a start and cost more than it
// saved: it spreads every cluster over every engine below its level,
// far from the optimum, where most engines serve one cluster. So did the
// first round's own water-filling at the clearing prices (each cluster
// at the level where its flows x = (d/κ)·(π − n − μ)⁺ carry its demand),
// tried again in the fourth pass: fewer Newton steps on some random
// fleets, more on the benchmark fleets (26 to 44 at 100x1000, 63 to 177
// at 300x3000).
//
// Warm, the previous flows (scaled to today's demand) give the loads and
// the centre, and the previous prices start the prices where it has them.
func (st *state) start(pv *previous) {
	m := st.m
	st.warm = pv != nil
	lam := st.cur.lam
	overloaded := false
	clearing := math.Inf(-1)
	if pv == nil {
		overloaded, clearing = st.clearingLoads(lam)
	} else {
		for i, a := range pv.arcs {
			lam[m.arcEng[a]] += pv.w[i] * m.demand[clusterOfArc(m, a)]
		}
		st.centreOnPrevious(pv)
	}
	for e := range m.ne {
		f := &m.eng[e]
		lam[e] = min(max(lam[e], 0), f.u)
		st.cur.mu[e], _ = f.marginal(lam[e])
		st.cur.mu[e] = max(st.cur.mu[e], clearing)
		if pv != nil && !math.IsNaN(pv.mu[e]) {
			st.cur.mu[e] = max(st.cur.mu[e], pv.mu[e])
		}
	}
	for c, d := range m.demand {
		switch {
		case d == 0:
		case overloaded:
			st.cur.pi[c] = m.penalty
		case pv != nil && !math.IsNaN(pv.pi[c]):
			st.cur.pi[c] = min(pv.pi[c], m.penalty)
		default:
			st.cur.pi[c] = st.entryPrice(c)
		}
	}
}

// entryPrice is cluster c's least entry price n + μ over its arcs at the
// current engine prices, or the shed penalty if that is less: where a
// cluster starts without a previous price (a pass over its arcs, which a
// warm start with prices no longer makes).
func (st *state) entryPrice(c int) float64 {
	m := st.m
	pi := m.penalty
	lo, hi := m.arcs(c)
	for a := lo; a < hi; a++ {
		pi = min(pi, m.arcNet[a]+st.cur.mu[m.arcEng[a]])
	}
	return pi
}

// clearingLoads sets the loads at which every engine has the same price
// and together they carry the total demand (or their caps, if it is more):
// the market-clearing loads of a fleet without network times. It costs a
// few passes over the engines. It reports whether the demand is at least
// the fleet's load cap (then every engine is at its cap), and the
// clearing price.
func (st *state) clearingLoads(lam []float64) (overloaded bool, price float64) {
	m := st.m
	capacity := 0.0
	for e := range m.ne {
		capacity += m.eng[e].u
	}
	target := min(m.total, capacity)
	supply := func(mu float64) (s, slope float64) {
		for e := range m.ne {
			f := &m.eng[e]
			l := f.loadAtPriceFrom(mu, lam[e])
			lam[e] = l
			s += l
			if l > 0 && l < f.u {
				_, d2 := f.marginal(l)
				slope += 1 / d2
			}
		}
		return s, slope
	}
	lo, hi := math.Inf(1), 0.0
	for e := range m.ne {
		lo, hi = min(lo, m.eng[e].a), max(hi, m.eng[e].d1u)
	}
	mu := lo
	for range 100 {
		s, slope := supply(mu)
		g := s - target
		if math.Abs(g) <= 1e-9*target {
			break
		}
		if g < 0 {
			lo = mu
		} else {
			hi = mu
		}
		next := mu - g/slope
		if slope == 0 || !(next > lo && next < hi) {
			next = lo + (hi-lo)/2
		}
		mu = next
	}
	return m.total > 0 && m.total >= capacity, mu
}

// centreOnPrevious sets the proximal centre to the previous flows, scaled
// to today's demand.
func (st *state) centreOnPrevious(pv *previous) {
	m := st.m
	st.yZero = false
	st.ySlots, st.ySorted = make([]int32, len(pv.arcs)), false
	for i, a := range pv.arcs {
		k := m.arcSlot[a]
		st.y[k] = pv.w[i] * m.demand[clusterOfArc(m, a)]
		st.ySlots[i] = k
	}
	for c, d := range m.demand {
		st.ys[c] = pv.shed[c] * d
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
