package backtest

import (
	"fmt"
	"math"
	"slices"

	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
)

// solve builds the problem from what is known now and installs the
// solution's weights and shed fractions.
func (p *optimizerPolicy) solve(s *sim) error {
	prob := p.problem(s)
	opt := optimize.DefaultOptions()
	opt.Tolerance = solveTolerance
	opt.Previous, opt.ChurnMs = p.prev, p.cfg.ChurnMs
	sol, err := optimize.Solve(prob, opt)
	if err != nil {
		return fmt.Errorf("backtest: optimizer: %w", err)
	}
	if err := checkSolution(prob, sol); err != nil {
		return err
	}
	p.solves++
	if p.prev != nil && s.now-p.publishedNs < int64(p.cfg.MaxInterval) && change(s, p.prev, sol) < p.cfg.MinChange {
		return nil // too small a change to publish; the tables stay
	}
	p.prev, p.publishedNs = sol, s.now

	for c, name := range s.fi.clusters {
		w := make([]float64, len(s.fi.engines))
		for en, v := range sol.Weights[name] {
			if e, ok := s.fi.engineIndex(en); ok {
				w[e] = v
			}
		}
		if err := p.set(c, w, sol.ShedFraction[name]); err != nil {
			return err
		}
	}
	return nil
}

// problem is the solver's input: observed demand, each available
// engine's profile (fitted, else the engine-model prior for the observed
// request shape), network times and eligibility from the fleet file.
func (p *optimizerPolicy) problem(s *sim) *optimize.Problem {
	f := s.fi.f
	sh := p.shape.get()
	prob := &optimize.Problem{
		MeanOutputTokens: sh.outputTokens,
		MaxUtilization:   f.MaxUtilization,
		ShedPenaltyMs:    f.ShedPenaltyMs,
		NetworkMs:        map[string]map[string]float64{},
		Eligible:         map[string][]string{},
	}
	avail := make([]bool, len(s.fi.engines))
	for e, name := range s.fi.engines {
		if avail[e] = p.available(s, e); avail[e] {
			prob.Engines = append(prob.Engines, p.profile(name, s.fi.params[e], e, sh))
		}
	}
	for c, name := range s.fi.clusters {
		prob.Clusters = append(prob.Clusters, optimize.Cluster{Name: name, DemandRps: p.demand[c]})
		row := map[string]float64{}
		elig := []string{}
		for _, e := range s.fi.elig[c] {
			if avail[e] {
				row[s.fi.engines[e]] = s.fi.net[c][e]
				elig = append(elig, s.fi.engines[e])
			}
		}
		prob.NetworkMs[name], prob.Eligible[name] = row, elig
	}
	return prob
}

// available is the derating of the optimizer service: an engine whose
// latest status says unhealthy or without ready replicas gets no traffic.
func (p *optimizerPolicy) available(s *sim, e int) bool {
	r := p.last[e]
	if r == nil {
		return true
	}
	return r.Healthy && r.ReadyReplicas > 0
}

func (p *optimizerPolicy) profile(name string, pr engine.Params, e int, sh requestShape) optimize.Engine {
	if f := p.fitted[e]; f != nil {
		return optimize.Engine{Name: name, CapacityRps: f.CapacityRPS,
			TTFT: optimize.TTFT{BaseMs: f.TTFTBaseMs, QueueMs: f.TTFTQueueMs},
			TBOT: optimize.TBOT{BaseMs: f.TBOTBaseMs, SlopeMs: f.TBOTSlopeMs}}
	}
	return priorEngine(name, pr, sh)
}

// solveTolerance is the relative duality gap a solve stops at, as the
// optimizer service runs it.
const solveTolerance = 1e-6

// maxSolutionGap is the largest relative duality gap of a solution the
// optimizer publishes.
const maxSolutionGap = 1e-3

// checkSolution is the optimizer's validation before publishing: a
// certified solution whose weights are finite, on eligible engines, and
// sum with the shed fraction to 1.
func checkSolution(p *optimize.Problem, sol *optimize.Solution) error {
	if !(sol.Gap <= maxSolutionGap) {
		return fmt.Errorf("backtest: optimizer: solution gap %.3g above %g", sol.Gap, maxSolutionGap)
	}
	for _, c := range p.Clusters {
		sum := sol.ShedFraction[c.Name]
		elig := p.Eligible[c.Name]
		for e, w := range sol.Weights[c.Name] {
			if !(w >= 0 && w <= 1) || !slices.Contains(elig, e) {
				return fmt.Errorf("backtest: optimizer: cluster %q weight %v on engine %q", c.Name, w, e)
			}
			sum += w
		}
		if math.Abs(sum-1) > 1e-6 {
			return fmt.Errorf("backtest: optimizer: cluster %q weights and shed sum to %v", c.Name, sum)
		}
	}
	return nil
}

// change is the mean over clusters of the total variation between two
// solutions' weights, the shed fraction counted as one more weight.
func change(s *sim, a, b *optimize.Solution) float64 {
	sum := 0.0
	for _, c := range s.fi.clusters {
		sum += sched.TotalVariation(a.Weights[c], b.Weights[c]) + math.Abs(a.ShedFraction[c]-b.ShedFraction[c])/2
	}
	return sum / float64(len(s.fi.clusters))
}
