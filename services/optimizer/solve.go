package optimizer

import (
	"fmt"
	"maps"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
)

// solveResult is one solve: its inputs, the solver's answer and what each
// cluster would be published.
type solveResult struct {
	at       time.Time
	asOf     int64 // newest window end the solve saw (unix ns); 0: none
	problem  *optimize.Problem
	sol      *optimize.Solution
	caps     []engineCap
	demand   map[string]float64 // what the problem used (0 for idle clusters)
	observed map[string]float64
	plans    []plan // fleet cluster order
	digest   string
	solveMs  float64
	limits   map[string]float64 // local admission queue limits, by engine
}

// solve estimates demand, derates capacity, builds the problem, solves it
// from the previous solution and checks the result. It reads the bucket
// state in o.prev but changes nothing there.
func (o *Optimizer) solve(at time.Time) (*solveResult, error) {
	f := o.cfg.Fleet
	o.dem.update(o.in, o.prev.shed())
	caps := derate(o.cfg.Derate, o.in, o.cfg.MeanPromptTokens)
	prior := priorDemand(f, caps, o.cfg.Demand.PriorLoad)
	dem := make(map[string]float64, len(f.Clusters))
	idle := map[string]bool{}
	for _, c := range f.Clusters {
		d := o.dem.rps(c.Name, prior[c.Name])
		if d < o.cfg.Demand.MinRPS {
			d, idle[c.Name] = 0, true
		}
		dem[c.Name] = d
	}
	p, err := buildProblem(f, caps, dem)
	if err != nil {
		return nil, err
	}
	sol, err := optimize.Solve(p, optimize.Options{
		Previous: o.prev.solution, ChurnMs: o.cfg.ChurnMs,
		Tolerance: o.cfg.Tolerance, MaxNewtonSteps: o.cfg.MaxNewtonSteps,
	})
	if err != nil {
		return nil, fmt.Errorf("optimizer: solve: %w", err)
	}
	if err := checkSolution(p, sol); err != nil {
		return nil, err
	}
	plans, err := o.plans(p, sol, idle, o.dem.known())
	if err != nil {
		return nil, err
	}
	return &solveResult{at: at, asOf: o.in.newestEnd, problem: p, sol: sol, caps: caps, demand: dem,
		observed: maps.Clone(o.dem.observed), plans: plans, digest: digest(p),
		limits: routing.QueueLimits(p, f.TTFTSLOMs)}, nil
}

// plans turns the solution into each cluster's weights and table. An idle
// cluster keeps its previous weights (on engines it may still use), so its
// conversations keep their engines until traffic returns.
// observed says whether any demand has been observed: before, nothing is
// shed (routing.PublishedShed).
func (o *Optimizer) plans(p *optimize.Problem, sol *optimize.Solution, idle map[string]bool, observed bool) ([]plan, error) {
	out := make([]plan, 0, len(p.Clusters))
	for _, c := range p.Clusters {
		pl := plan{cluster: c.Name}
		pl.weights, pl.shed = normalize(sol.Weights[c.Name], routing.PublishedShed(sol.ShedFraction[c.Name], observed))
		if idle[c.Name] {
			if w, shed, ok := o.prev.keep(c.Name, p.Eligible[c.Name]); ok {
				pl.weights, pl.shed, pl.kept = w, shed, true
			}
		}
		t, err := buildTable(o.prev.tables[c.Name], pl.weights)
		if err != nil {
			return nil, fmt.Errorf("optimizer: %w: cluster %s: table: %w", routing.ErrRejected, c.Name, err)
		}
		pl.table = t
		out = append(out, pl)
	}
	return out, nil
}

// snapshots returns the snapshot of every plan, without version and time
// (the publisher sets them).
func (r *solveResult) snapshots() []*schemas.Snapshot {
	out := make([]*schemas.Snapshot, 0, len(r.plans))
	for _, pl := range r.plans {
		s := &schemas.Snapshot{Cluster: pl.cluster, Weights: pl.weights, ShedFraction: pl.shed, InputsDigest: r.digest,
			QueueLimits: r.clusterLimits(pl.cluster)}
		if r.asOf > 0 {
			s.InputsAsOf = time.Unix(0, r.asOf).UTC()
		}
		if pl.table != nil {
			slots, engines, enc, data := pl.table.Encode()
			s.Table = &schemas.SnapshotTable{Slots: slots, Encoding: enc, Engines: engines, Data: data}
		}
		out = append(out, s)
	}
	return out
}

// clusterLimits are the queue limits of the engines cluster may use.
func (r *solveResult) clusterLimits(cluster string) map[string]float64 {
	out := map[string]float64{}
	for _, e := range r.problem.Eligible[cluster] {
		if l, ok := r.limits[e]; ok {
			out[e] = l
		}
	}
	return out
}

// shed returns the shed fraction of every published cluster: what was in
// force while the latest windows were observed.
func (p *published) shed() map[string]float64 {
	out := make(map[string]float64, len(p.snaps))
	for c, s := range p.snaps {
		out[c] = s.ShedFraction
	}
	return out
}

// keep returns the previous weights of cluster restricted to the engines
// it may use now, rescaled to sum to 1 − the previous shed fraction.
func (p *published) keep(cluster string, eligible []string) (map[string]float64, float64, bool) {
	s, ok := p.snaps[cluster]
	if !ok || s.ShedFraction >= 1 {
		return nil, 0, false
	}
	w := map[string]float64{}
	for _, e := range eligible {
		if v := s.Weights[e]; v > 0 {
			w[e] = v
		}
	}
	if len(w) == 0 {
		return nil, 0, false
	}
	w, shed := normalize(w, s.ShedFraction)
	return w, shed, true
}

// changeFrom is the largest, over clusters, routing.Change between r's
// weights and the published ones (the total variation distance, shed
// counted as one more weight); 1 when a cluster has no published snapshot.
func (r *solveResult) changeFrom(p *published) float64 {
	worst := 0.0
	for _, pl := range r.plans {
		s, ok := p.snaps[pl.cluster]
		if !ok {
			return 1
		}
		worst = max(worst, routing.Change(pl.weights, pl.shed, s.Weights, s.ShedFraction))
	}
	return worst
}

// anchor is the previous solution the solver's churn term and warm start
// use (routing.Anchor): the published weights and shed fractions, with
// the cluster prices of the solve that made them when known.
func anchor(snaps map[string]*schemas.Snapshot, prices map[string]float64) *optimize.Solution {
	weights := make(map[string]map[string]float64, len(snaps))
	shed := make(map[string]float64, len(snaps))
	for c, s := range snaps {
		weights[c], shed[c] = s.Weights, s.ShedFraction
	}
	return routing.Anchor(weights, shed, prices)
}
