package optimize

import (
	"fmt"
	"math"
)

// Options tunes Solve. The zero value is not valid; start from
// DefaultOptions.
type Options struct {
	// Previous is the last solution, used to warm-start (its weights and
	// prices) and, with ChurnMs > 0, as the anchor of the churn term.
	// Clusters and engines are matched by name; ones it lacks start cold.
	Previous *Solution
	// ChurnMs prices moving traffic away from Previous: the objective gains
	// (ChurnMs/2)·‖w_c − w_prev,c‖² ms per request of each cluster c (the
	// shed fraction counts as one more weight). Moving all of a cluster's
	// traffic from one engine to another costs ChurnMs per request; a route
	// Δ ms better per request wins at most a fraction Δ/(2·ChurnMs) of the
	// cluster in one solve. 0 solves for the exact optimum.
	ChurnMs float64
	// Tolerance is the relative duality gap at which Solve stops.
	Tolerance float64
	// MaxNewtonSteps bounds the total work; Solve returns its best solution
	// with an honest gap when it runs out.
	MaxNewtonSteps int

	trace       func(format string, a ...any) // tests: progress lines
	keepCycling bool                          // tests: run a Newton cycle out to the step budget
}

// DefaultOptions returns options for an exact, cold solve.
func DefaultOptions() Options {
	return Options{Tolerance: 1e-9, MaxNewtonSteps: 2000}
}

// Validate reports options Solve cannot use.
func (o Options) Validate() error {
	switch {
	case !(o.ChurnMs >= 0) || math.IsInf(o.ChurnMs, 0):
		return fmt.Errorf("optimize: ChurnMs %v is not a finite number ≥ 0", o.ChurnMs)
	case !(o.Tolerance > 0 && o.Tolerance < 1):
		return fmt.Errorf("optimize: Tolerance %v is not in (0, 1)", o.Tolerance)
	case o.MaxNewtonSteps <= 0:
		return fmt.Errorf("optimize: MaxNewtonSteps %d is not positive", o.MaxNewtonSteps)
	}
	return nil
}

// Solve finds the traffic split that minimises mean end-to-end latency, as
// DESIGN.md's `ilb solve` states it, and returns it with a certificate: a
// lower bound on the optimum from the dual, the relative gap to it, and the
// KKT residual. It is deterministic: the same problem and options give a
// bit-identical solution. SolveMs is left for the caller to fill.
func Solve(p *Problem, opt Options) (*Solution, error) {
	m, err := checkAndBuild(p, opt)
	if err != nil {
		return nil, err
	}
	return solveModel(p, m, opt, &memory{}), nil
}

// checkAndBuild validates p and opt and builds p's model (Solve and
// Solver.Solve).
func checkAndBuild(p *Problem, opt Options) (*model, error) {
	if err := p.validateAllButNetwork(); err != nil {
		return nil, p.Validate()
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	m, ok := buildModel(p)
	if !ok {
		return nil, p.Validate() // network_ms is bad: Validate says where
	}
	return m, nil
}

// solveModel solves p, whose model is m, with options opt that Validate
// accepted, in working memory mem: the part of Solve after the model is
// built, which Solver's Resolve shares, so that both give the same
// solution bit for bit.
func solveModel(p *Problem, m *model, opt Options, mem *memory) *Solution {
	st := newState(m, mem)
	mem.lend(st)
	defer mem.keep(st)
	st.trace, st.keepCycling = opt.trace, opt.keepCycling
	prev := warmStart(p, m, opt.Previous)
	st.churn = opt.ChurnMs > 0 && prev != nil
	st.start(prev)
	var run runStats
	if st.churn {
		run = st.solveProximal(opt)
	} else {
		run = st.solveExact(opt)
	}
	return st.solution(p, prev, run)
}

// runStats is what the solve loop reports besides the flows.
type runStats struct {
	steps, rounds int
	cert          certificate
}

// maxRounds bounds the proximal rounds of one solve.
const maxRounds = 60

// kappaStart and kappaFloor bound the proximal strengths of the exact
// solve, in ms per request for moving a whole cluster. The first round
// is smooth enough for Newton's method from a rough start; each round
// divides κ by 10, down to the floor (values tuned on random fleets with
// real RTTs: 30 and 100 took more steps, 1000 sometimes many more).
// kappaWarm starts a warm solve whose crossover from the previous
// solution did not close. crossoverGap is the duality gap below which a
// round's point is close enough for the crossover to close in a few
// changes.
const (
	roundTol     = 1e-2
	kappaStart   = 300.0
	kappaWarm    = 10.0
	kappaFloor   = 1e-2
	crossoverGap = 1e-6
)

// solveExact runs the proximal point method: each round solves the
// problem with a proximal term centred on the last flows, and the loop
// stops when the duality gap of the original problem is at most the
// tolerance. κ falls tenfold a round to kappaFloor, then stays: below it,
// flows x = w·(b − μ) with w = d/κ amplify the rounding of prices beyond
// what the certificate can resolve.
func (st *state) solveExact(opt Options) runStats {
	nw := st.mem.newtonWork(st.m)
	nw.widen = true
	var run runStats
	kappa := kappaStart
	if st.warm {
		kappa = kappaWarm
	}
	best := certificate{gap: math.Inf(1)}
	floor := kappaFloor
	triedTies := false
	if st.warm {
		// The previous solution's ties are usually the optimum's, or a few
		// changes from it: try the exact finish first.
		if ct, ok := st.tryTies(st.centrePoint()); ok && ct.gap <= opt.Tolerance {
			run.cert = ct
			return run
		}
		if ct, ok := st.tryCrossover(st.centrePoint()); ok {
			best = ct
			if best.gap <= opt.Tolerance {
				run.cert = best
				return run
			}
		}
	}
	for run.rounds = 1; ; run.rounds++ {
		st.setKappa(kappa)
		// Rounds above the floor only steer: solve them loosely, to a
		// relative residual of roundTol, or κ·1e-4 below κ = 100. A
		// roundTol of 1e-2 rather than 1e-3 (issue 15, sixth pass) saves
		// the first round's last 1-3 Newton steps and leaves the tie
		// method as many moves, or nearly; the classes fleet, whose ties
		// do not close, took 209 steps instead of 364.
		tol := 1e-12
		if kappa > kappaFloor {
			tol = min(roundTol, kappa*1e-4)
		}
		n, cycled := st.maximize(nw, tol, opt.MaxNewtonSteps-run.steps)
		run.steps += n
		converged := st.maxRelGrad(st.cur) <= 10*tol
		ct := st.certifyExact()
		st.tracef("round %d κ=%.3g: %d steps, residual %.3g, %d flows, gap %.3g", run.rounds, kappa, n, st.maxRelGrad(st.cur), len(st.cur.act), ct.gap)
		if ct.gap < best.gap {
			best = ct
		}
		// Close exactly when near: the crossover's flows obey the optimality
		// conditions to rounding, while a point that merely meets the gap
		// tolerance can have flows off by about its square root.
		if ct.gap < tiesGap && !triedTies {
			triedTies = true
			if xt, ok := st.tryTies(st.cur); ok && xt.gap <= opt.Tolerance {
				best = xt
				break
			}
		}
		if ct.gap < crossoverGap {
			if xt, ok := st.tryCrossover(st.cur); ok && (xt.gap <= opt.Tolerance || xt.gap < best.gap) {
				best = xt
				break
			}
		}
		// A cycle stops where the step budget would have run out: as then.
		if best.gap <= opt.Tolerance || run.steps >= opt.MaxNewtonSteps || cycled || run.rounds >= maxRounds {
			break
		}
		if !converged {
			// Newton could not resolve this κ (near-ties far finer than
			// the rounding of prices times w = d/κ): never go this low
			// again, and redo the round smoother from the same centre.
			floor = min(kappaStart, max(floor, kappa*10))
			kappa = floor
			continue
		}
		st.recentre()
		kappa = max(kappa/10, floor)
	}
	run.cert = best
	return run
}

// tryCrossover runs the crossover from point from and certifies its
// result; the current point is left as it was.
func (st *state) tryCrossover(from *point) (certificate, bool) {
	p, ok := st.crossover(from, crossoverChanges+2*st.m.nc)
	st.tracef("crossover closed: %v", ok)
	if !ok {
		return certificate{}, false
	}
	saved := st.cur
	st.cur = p
	ct := st.certifyExact()
	st.tracef("crossover certificate: gap %.3g kkt %.3g obj %.12g dual %.12g", ct.gap, ct.kkt, ct.obj, ct.dual)
	st.cur = saved
	return ct, true
}

// tiesGap is the duality gap below which a round's point is near enough
// for the tie method (ties.go) to finish in few moves.
const tiesGap = 1e-2

// tryTies runs the tie method from point from (its prices and, for the
// first ties, its flows) and certifies its result; the current point is
// left as it was.
func (st *state) tryTies(from *point) (certificate, bool) {
	x := newTies(st.m, from.pi)
	x.bids = st.mem.bids // capacity only: build writes every value it reads
	x.tiesFrom(from)
	ok := x.solve(tieMoves + tieMovesPerCluster*st.m.nc)
	st.mem.bids = x.bids
	st.tracef("ties closed: %v after %d moves (%d merges, %d splits, %d list builds, %d full moves)", ok, x.moves, x.merges, x.splits, x.rebuilds, x.fullMoves)
	if !ok {
		return certificate{}, false
	}
	saved := st.cur
	st.cur = x.point()
	ct := st.certifyExact()
	st.tracef("ties certificate: gap %.3g kkt %.3g obj %.12g dual %.12g", ct.gap, ct.kkt, ct.obj, ct.dual)
	st.cur = saved
	return ct, true
}

// tieMoves, plus tieMovesPerCluster per cluster, bounds the moves of one
// tie attempt (from a round's point a fleet of 100 clusters needs a few
// hundred; degenerate fleets, whose clusters bid exactly alike for many
// engines, can merge and split far longer, and the rounds then go on).
const (
	tieMoves           = 200
	tieMovesPerCluster = 20
)

// crossoverChanges, plus two per cluster, bounds the forest changes of one
// crossover attempt.
const crossoverChanges = 200

// solveProximal solves the churn-regularised problem once, exactly: the
// proximal centre is the previous solution and κ = ChurnMs.
func (st *state) solveProximal(opt Options) runStats {
	nw := st.mem.newtonWork(st.m)
	st.setKappa(opt.ChurnMs)
	steps, _ := st.maximize(nw, 1e-13, opt.MaxNewtonSteps)
	return runStats{steps: steps, rounds: 1, cert: st.certifyProximal()}
}
