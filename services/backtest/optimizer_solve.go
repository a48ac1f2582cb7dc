package backtest

import (
	"fmt"
	"time"

	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/prior"
)

// solveTolerance and maxNewtonSteps bound a solve, as the optimizer
// service's defaults do.
const (
	solveTolerance = 1e-6
	maxNewtonSteps = 2000
)

// solve builds the problem from what is known now, solves it from the
// published solution, checks it, and publishes it (installs its weights,
// shed fractions and tables) when some cluster moved by MinChange or
// MaxInterval has passed: the optimizer service's cycle.
func (p *optimizerPolicy) solve(s *sim) error {
	prob, err := p.problem(s)
	if err != nil {
		return fmt.Errorf("backtest: optimizer: %w", err)
	}
	// The fleet is fixed for the run, so a problem with the same rows and
	// engines has the same network times and eligibility
	// (routing.BuildProblem), which is what Resolve asks; it rebuilds its
	// model when the engines change.
	sol, err := p.solver.Resolve(prob, optimize.Options{Previous: p.prev, ChurnMs: p.cfg.ChurnMs,
		Tolerance: solveTolerance, MaxNewtonSteps: maxNewtonSteps})
	if err != nil {
		return fmt.Errorf("backtest: optimizer: %w", err)
	}
	if err := routing.CheckSolution(prob, sol); err != nil {
		return fmt.Errorf("backtest: optimizer: %w", err)
	}
	p.solves++
	p.calib.record(s.now, s.fi, prob)
	released := p.release.Observe(routing.TotalDemand(prob), routing.Sheds(sol))
	sc := p.cfg.Smooth
	if released {
		sc = sc.Released()
	}
	weights, shed := p.publishable(s, prob, sol, sc)
	if routing.Overloads(prob, weights) {
		// A calm row's smoothed split would overload an engine (after a
		// demand swing): the calm rows publish their solution as it is.
		weights, shed = p.publishable(s, prob, sol, sc.CalmAsSolved())
	}
	if p.prev != nil && s.now-p.publishedNs < int64(p.cfg.MaxInterval) && p.change(s, weights, shed) < p.cfg.MinChange {
		return nil // too small a change to publish; the tables stay
	}
	for c, name := range s.fi.rowName {
		if err := p.setWeights(c, weights[name], shed[name]); err != nil {
			return err
		}
	}
	p.published, p.pubShed, p.publishedNs = weights, shed, s.now
	p.setLimits(p.queueLimits(s, prob))
	p.prev = routing.Anchor(weights, shed, sol.ClusterPriceMs)
	return nil
}

// queueLimits are the local admission limits the snapshot carries
// (routing.QueueLimits), by engine index.
func (p *optimizerPolicy) queueLimits(s *sim, prob *optimize.Problem) []float64 {
	out := make([]float64, len(s.fi.engines))
	for name, l := range routing.QueueLimits(prob, s.fi.f.TTFTSLOMs) {
		if e, ok := s.fi.engineIndex(name); ok {
			out[e] = l
		}
	}
	return out
}

// change is the largest move of a demand row from the published weights
// (routing.Change).
func (p *optimizerPolicy) change(s *sim, weights map[string]map[string]float64, shed map[string]float64) float64 {
	worst := 0.0
	for _, c := range s.fi.rowName {
		worst = max(worst, routing.Change(p.published[c], p.pubShed[c], weights[c], shed[c]))
	}
	return worst
}

// problem is the solver's input (routing.BuildProblem): demand as
// estimated (the prior before the first observation), each engine's
// profile (fitted, else the engine-model prior for the observed request
// shape) derated by its latest status, network times and eligibility
// from the fleet file, and the observed mean answer length.
func (p *optimizerPolicy) problem(s *sim) (*optimize.Problem, error) {
	sh := p.shape.Get()
	derate := routing.Derate(p.cfg.Derate, s.fi.f, p.last, p.newestEnd)
	engines := make([]optimize.Engine, len(s.fi.engines))
	for e, name := range s.fi.engines {
		engines[e] = p.profile(s, e, sh)
		engines[e].Name = name
		engines[e].CapacityRps *= derate[e].Factor
	}
	demand := p.prior
	if p.demand.Known() {
		demand = make([]float64, s.fi.nrows())
		for c := range demand {
			demand[c] = p.demand.RPS(c)
		}
	}
	return p.builder.Build(s.fi.f, s.fi.rows, engines, demand, sh.OutputTokens)
}

// profile is engine e's fitted profile, else its prior for shape sh.
// The fit's capacity is checked against the prior's (routing.CapFit), at
// the largest load its windows saw (per replica in the fit; the engine's).
func (p *optimizerPolicy) profile(s *sim, e int, sh prior.Shape) optimize.Engine {
	pr := prior.Profile(s.fi.engines[e], s.fi.params[e], sh)
	if f := p.fitted[e]; f != nil {
		return routing.CapFit(optimize.Engine{CapacityRps: f.CapacityRPS,
			TTFT: optimize.TTFT{BaseMs: f.TTFTBaseMs, QueueMs: f.TTFTQueueMs},
			TBOT: optimize.TBOT{BaseMs: f.TBOTBaseMs, SlopeMs: f.TBOTSlopeMs}}, pr,
			f.LoadMaxRPS*float64(max(s.fi.params[e].Replicas, 1)))
	}
	return pr
}

// publishable is each row's weights and shed fraction to publish: the
// solution (routing.Normalize), smoothed from the published routing with
// sc (routing.Smooth, with the prefix cache reuse that sets how slowly a
// row that sheds nothing moves; SmoothConfig.Released once an overload
// has ended).
func (p *optimizerPolicy) publishable(s *sim, prob *optimize.Problem, sol *optimize.Solution, sc routing.SmoothConfig) (map[string]map[string]float64, map[string]float64) {
	reuse := p.shape.Get().CachedFraction
	weights := make(map[string]map[string]float64, s.fi.nrows())
	shed := make(map[string]float64, s.fi.nrows())
	for _, c := range s.fi.rowName {
		weights[c], shed[c] = routing.Normalize(sol.Weights[c], routing.PublishedShed(sol.ShedFraction[c], routing.DemandKnown(s.fi.f, p.demand)))
		if p.published != nil {
			weights[c], shed[c] = routing.Smooth(sc, p.published[c], p.pubShed[c], weights[c], shed[c],
				routing.Usable(prob, c), time.Duration(s.now-p.publishedNs), reuse)
		}
	}
	return weights, shed
}
