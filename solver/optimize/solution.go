package optimize

import "math"

// Solution is the answer to a Problem, in the JSON form of `ilb solve`
// (DESIGN.md), plus the certificate and the prices behind it.
type Solution struct {
	// ObjectiveMs is the mean end-to-end latency in ms, shed requests
	// counted at the shed penalty. It excludes the churn term.
	ObjectiveMs float64 `json:"objective_ms"`
	// ShedPenaltyMs is the shed penalty the solve used: the problem's, or
	// the automatic one when the problem's is 0.
	ShedPenaltyMs float64 `json:"shed_penalty_ms"`
	// Weights[c][e] is the fraction of cluster c's requests sent to engine
	// e; only positive weights are listed. They sum to 1 − ShedFraction[c].
	Weights       map[string]map[string]float64 `json:"weights"`
	ShedFraction  map[string]float64            `json:"shed_fraction"`
	EngineLoadRps map[string]float64            `json:"engine_load_rps"`
	// SolveMs is the wall time of the solve; Solve leaves it to its caller.
	SolveMs float64 `json:"solve_ms"`

	// LowerBoundMs is a proven lower bound on the optimum (of the
	// objective plus the churn term when ChurnMs > 0), from the dual.
	LowerBoundMs float64 `json:"lower_bound_ms"`
	// Gap is the relative duality gap: (value − LowerBoundMs) / value.
	Gap float64 `json:"gap"`
	// KKTResidualMs is the largest violation of the optimality conditions
	// (equal marginal cost on every used route, none cheaper), in ms.
	KKTResidualMs float64 `json:"kkt_residual_ms"`
	// ChurnCostMs is the churn term's value, in ms per request.
	ChurnCostMs float64 `json:"churn_cost_ms"`
	// WeightChurn is the mean over clusters of the total variation distance
	// ½·Σ|Δw| from Options.Previous (0 without one).
	WeightChurn float64 `json:"weight_churn"`
	// ClusterPriceMs[c] is the marginal cost of one more request from c:
	// the latency of its used routes (or the shed penalty when it sheds).
	ClusterPriceMs map[string]float64 `json:"cluster_price_ms"`
	// EnginePriceMs[e] is engine e's marginal cost F'(λ) (at the load cap
	// it includes the cap's shadow price).
	EnginePriceMs map[string]float64 `json:"engine_price_ms"`
	// NewtonSteps and Rounds count the solver's work.
	NewtonSteps int `json:"newton_steps"`
	Rounds      int `json:"rounds"`
}

// solution builds the Solution from the certificate's repaired flows.
func (st *state) solution(p *Problem, pv *previous, run runStats) *Solution {
	m, ct := st.m, &run.cert
	sol := &Solution{
		Weights:        make(map[string]map[string]float64, m.nc),
		ShedFraction:   make(map[string]float64, m.nc),
		EngineLoadRps:  make(map[string]float64, m.ne),
		ClusterPriceMs: make(map[string]float64, m.nc),
		EnginePriceMs:  make(map[string]float64, m.ne),
		NewtonSteps:    run.steps,
		Rounds:         run.rounds,
		Gap:            ct.gap,
		KKTResidualMs:  ct.kkt,
		ShedPenaltyMs:  m.penalty,
	}
	if m.total > 0 {
		sol.ObjectiveMs = ct.obj / m.total
		sol.ChurnCostMs = ct.reg / m.total
		sol.LowerBoundMs = ct.dual / m.total
	}
	for e, en := range p.Engines {
		sol.EngineLoadRps[en.Name] = ct.lam[e]
		sol.EnginePriceMs[en.Name] = ct.mu[e]
	}
	for c, cl := range p.Clusters {
		sol.Weights[cl.Name] = map[string]float64{}
		if m.demand[c] == 0 {
			st.idleCluster(p, c, ct.mu, sol)
			continue
		}
		sol.ShedFraction[cl.Name] = ct.s[c] / m.demand[c]
		sol.ClusterPriceMs[cl.Name] = ct.pi[c]
	}
	sums := make([]float64, m.nc) // per cluster Σ weights, in engine order (arcs are by engine)
	for i, a := range ct.arcs {
		c := clusterOfArc(m, a)
		w := ct.flow[i] / m.demand[c]
		sol.Weights[p.Clusters[c].Name][p.Engines[m.arcEng[a]].Name] = w
		sums[c] += w
	}
	if pv != nil {
		sol.WeightChurn = st.weightChurn(p, pv, sol, sums)
	}
	return sol
}

// idleCluster gives a cluster without demand the route its first request
// should take at the solution's prices: the engine of least network time
// plus engine price (lowest index on ties), or shedding when that exceeds
// the shed penalty.
func (st *state) idleCluster(p *Problem, c int, mu []float64, sol *Solution) {
	m := st.m
	best, bestE := m.penalty, -1
	lo, hi := m.arcs(c)
	for a := lo; a < hi; a++ {
		e := int(m.arcEng[a])
		if v := m.arcNet[a] + mu[e]; v < best {
			best, bestE = v, e
		}
	}
	name := p.Clusters[c].Name
	sol.ClusterPriceMs[name] = best
	if bestE < 0 {
		sol.ShedFraction[name] = 1
		return
	}
	sol.ShedFraction[name] = 0
	sol.Weights[name][p.Engines[bestE].Name] = 1
}

// weightChurn is the mean over clusters of ½·Σ|Δw| (shed included) between
// the previous solution and sol, for clusters both have. Previous weight on
// engines the cluster can no longer use counts as moved.
func (st *state) weightChurn(p *Problem, pv *previous, sol *Solution, sums []float64) float64 {
	total, n := 0.0, 0
	for c, cl := range p.Clusters {
		if !pv.known[c] {
			continue
		}
		cur := sol.Weights[cl.Name]
		tv := math.Abs(sol.ShedFraction[cl.Name]-pv.shed[c]) + pv.lost[c]
		matched := 0.0
		for i := pv.start[c]; i < pv.start[c+1]; i++ {
			now := cur[p.Engines[st.m.arcEng[pv.arcs[i]]].Name]
			tv += math.Abs(now - pv.w[i])
			matched += now
		}
		sum := sums[c] // summed in engine order, not map order: bit-identical
		if st.m.demand[c] == 0 {
			sum = 0
			for _, w := range cur { // an idle cluster's one route (idleCluster)
				sum += w
			}
		}
		tv += max(0, sum-matched) // weight on engines the previous solution did not use
		total += tv / 2
		n++
	}
	if n == 0 {
		return 0
	}
	return total / float64(n)
}
