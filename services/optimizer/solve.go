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
	rows     *routing.Rows
	demand   map[string]float64 // by row name: what the problem used (0 for idle rows)
	observed map[string]float64
	plans    []plan // by row
	digest   string
	solveMs  float64
	limits   map[string]float64 // local admission queue limits, by engine
	prefill  map[string]float64 // local admission prefill limits, by engine (routing.PrefillLimits)
}

// solve estimates demand, derates capacity, builds the problem, solves it
// from the previous solution and checks the result. It reads the bucket
// state in o.prev but changes nothing there.
func (o *Optimizer) solve(at time.Time) (*solveResult, error) {
	f, rows := o.cfg.Fleet, o.rows
	o.dem.update(o.in, rows, o.prev.shed(f, rows))
	o.shape.update(o.in)
	caps := derate(o.cfg.Derate, o.in, o.shape.get())
	prior := priorDemand(f, rows, caps, o.cfg.Demand.PriorLoad)
	dem := make(map[string]float64, rows.Len())
	idle := map[string]bool{}
	for _, rw := range rows.Rows {
		d := o.dem.rps(rw.Name, prior[rw.Name])
		if d < o.cfg.Demand.MinRPS {
			d, idle[rw.Name] = 0, true
		}
		dem[rw.Name] = d
	}
	p, err := buildProblem(f, rows, caps, dem)
	if err != nil {
		return nil, err
	}
	// Within one fleet, a problem with the same rows and engines has the
	// same network times and eligibility (routing.BuildProblem), which is
	// what Resolve asks; it rebuilds its model when the engines change.
	sol, err := o.solver.Resolve(p, optimize.Options{
		Previous: o.prev.solution, ChurnMs: o.cfg.ChurnMs,
		Tolerance: o.cfg.Tolerance, MaxNewtonSteps: o.cfg.MaxNewtonSteps,
	})
	if err != nil {
		return nil, fmt.Errorf("optimizer: solve: %w", err)
	}
	if err := checkSolution(p, sol); err != nil {
		return nil, err
	}
	sc := o.cfg.Smooth
	if o.release.Observe(routing.TotalDemand(p), routing.Sheds(sol)) {
		sc = sc.Released() // the overload has ended (routing.Release)
	}
	plans, err := o.plans(p, sol, idle, o.dem.known() || f.TotalDemandRPS > 0, o.sincePublish(), sc)
	if err != nil {
		return nil, err
	}
	return &solveResult{at: at, asOf: o.in.newestEnd, problem: p, sol: sol, caps: caps, rows: rows, demand: dem,
		observed: maps.Clone(o.dem.observed), plans: plans, digest: digest(p),
		limits: routing.QueueLimits(p, f.TTFTSLOMs), prefill: routing.PrefillLimits(f)}, nil
}

// plans turns the solution into each demand row's weights and table
// (p's clusters are the rows, in row order): routings, then a table for
// each.
func (o *Optimizer) plans(p *optimize.Problem, sol *optimize.Solution, idle map[string]bool, known bool, dt time.Duration, sc routing.SmoothConfig) ([]plan, error) {
	out := o.routings(p, sol, idle, known, dt, sc)
	if routing.Overloads(p, planWeights(out)) {
		// A calm row's smoothed split would overload an engine (after a
		// demand swing): the calm rows publish their solution as it is.
		out = o.routings(p, sol, idle, known, dt, sc.CalmAsSolved())
	}
	for i := range out {
		t, err := buildTable(o.prev.tables[out[i].row], out[i].weights)
		if err != nil {
			return nil, fmt.Errorf("optimizer: %w: row %s: table: %w", routing.ErrRejected, out[i].row, err)
		}
		out[i].table = t
	}
	return out, nil
}

// routings is each demand row's weights and shed fraction to publish. An
// idle row keeps its previous weights (on engines it may still use), so
// its conversations keep their engines until traffic returns. known says
// whether any demand has been observed: before, nothing is shed
// (routing.PublishedShed). A row that sheds, or shed at the last publish,
// moves toward the solution at the pace of cfg.Smooth (routing.Smooth),
// dt being the time since the last publish (0: not known, no smoothing);
// so does the split of a row that sheds nothing, the more slowly the more
// of their prompt tokens the engines serve from their prefix caches
// (o.reuse); sc is cfg.Smooth, or with its calm rows published as solved
// (SmoothConfig.CalmAsSolved).
func (o *Optimizer) routings(p *optimize.Problem, sol *optimize.Solution, idle map[string]bool, known bool, dt time.Duration, sc routing.SmoothConfig) []plan {
	out := make([]plan, 0, len(p.Clusters))
	reuse := o.reuse()
	prev := o.prev.solution
	for r, c := range p.Clusters {
		pl := plan{row: c.Name, cluster: o.rows.Rows[r].Cluster}
		pl.weights, pl.shed = normalize(sol.Weights[c.Name], routing.PublishedShed(sol.ShedFraction[c.Name], known))
		if idle[c.Name] {
			if w, shed, ok := keep(prev, c.Name, p.Eligible[c.Name]); ok {
				pl.weights, pl.shed, pl.kept = w, shed, true
			}
		} else if prev != nil {
			pl.weights, pl.shed = routing.Smooth(sc, prev.Weights[c.Name], prev.ShedFraction[c.Name], pl.weights, pl.shed,
				routing.Usable(p, c.Name), dt, reuse)
		}
		out = append(out, pl)
	}
	return out
}

// sincePublish is the window time from this instance's last publish to
// the newest window now observed: event time, so that a replay smooths as
// the live run did. 0 (not known) before this instance has published,
// e.g. after it took over the lease.
func (o *Optimizer) sincePublish() time.Duration {
	if o.prevAsOf <= 1 || o.in.newestEnd <= o.prevAsOf {
		return 0
	}
	return time.Duration(o.in.newestEnd - o.prevAsOf)
}

// snapshots returns the snapshot of every cluster (fleet order), without
// version and time (the publisher sets them): its rows folded in by
// routing.ClusterSnapshot (a fleet of one class: the row's weights and
// table; else a class per row and their demand-weighted mix on top).
func (r *solveResult) snapshots(f *schemas.Fleet) []*schemas.Snapshot {
	plans := make([]routing.RowPlan, len(r.plans))
	for i, pl := range r.plans {
		plans[i] = routing.RowPlan{Weights: pl.weights, Shed: pl.shed, Table: pl.table, Demand: r.demand[pl.row]}
	}
	out := make([]*schemas.Snapshot, 0, len(f.Clusters))
	for c, fc := range f.Clusters {
		s := routing.ClusterSnapshot(r.rows, c, plans)
		s.Cluster, s.InputsDigest = fc.Name, r.digest
		s.QueueLimits, s.PrefillLimits = r.clusterLimits(c, r.limits), r.clusterLimits(c, r.prefill)
		if r.asOf > 0 {
			s.InputsAsOf = time.Unix(0, r.asOf).UTC()
		}
		out = append(out, s)
	}
	return out
}

// clusterLimits are the limits (queue or prefill) of the engines cluster
// c's rows may use.
func (r *solveResult) clusterLimits(c int, limits map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, row := range r.rows.ClusterRows(c) {
		for _, e := range r.problem.Eligible[r.rows.Rows[row].Name] {
			if l, ok := limits[e]; ok {
				out[e] = l
			}
		}
	}
	return out
}

// shed returns the shed fraction of every published row, by row name:
// what was in force while the latest windows were observed.
func (p *published) shed(f *schemas.Fleet, rows *routing.Rows) map[string]float64 {
	out := map[string]float64{}
	for c, fc := range f.Clusters {
		if s, ok := p.snaps[fc.Name]; ok {
			for r, rr := range routing.SnapshotRows(f, rows, c, s) {
				out[rows.Rows[r].Name] = rr.Shed
			}
		}
	}
	return out
}

// keep returns the previous weights of a row (from the anchor, which
// holds what is published) restricted to the engines it may use now,
// rescaled to sum to 1 − the previous shed fraction.
func keep(prev *optimize.Solution, row string, eligible []string) (map[string]float64, float64, bool) {
	if prev == nil {
		return nil, 0, false
	}
	pw, ok := prev.Weights[row]
	if !ok || prev.ShedFraction[row] >= 1 {
		return nil, 0, false
	}
	w := map[string]float64{}
	for _, e := range eligible {
		if v := pw[e]; v > 0 {
			w[e] = v
		}
	}
	if len(w) == 0 {
		return nil, 0, false
	}
	w, shed := normalize(w, prev.ShedFraction[row])
	return w, shed, true
}

// changeFrom is the largest, over rows, routing.Change between r's
// weights and the published ones (the total variation distance, shed
// counted as one more weight); 1 when a row has no published weights.
func (r *solveResult) changeFrom(p *published) float64 {
	if p.solution == nil {
		return 1
	}
	worst := 0.0
	for _, pl := range r.plans {
		w, ok := p.solution.Weights[pl.row]
		if !ok {
			return 1
		}
		worst = max(worst, routing.Change(pl.weights, pl.shed, w, p.solution.ShedFraction[pl.row]))
	}
	return worst
}

// anchor is the previous solution the solver's churn term and warm start
// use (routing.Anchor): the published weights and shed fractions of every
// row (routing.SnapshotRows), with the row prices of the solve that made
// them when known.
func anchor(f *schemas.Fleet, rows *routing.Rows, snaps map[string]*schemas.Snapshot, prices map[string]float64) *optimize.Solution {
	weights := map[string]map[string]float64{}
	shed := map[string]float64{}
	for c, fc := range f.Clusters {
		s, ok := snaps[fc.Name]
		if !ok {
			continue
		}
		for r, rr := range routing.SnapshotRows(f, rows, c, s) {
			weights[rows.Rows[r].Name], shed[rows.Rows[r].Name] = rr.Weights, rr.Shed
		}
	}
	return routing.Anchor(weights, shed, prices)
}

// reuse is the share of prompt tokens the engines served from their
// prefix caches lately (the request shape's cached fraction), which sets
// how slowly a row that sheds nothing moves (routing.Smooth).
func (o *Optimizer) reuse() float64 {
	if o.shape == nil {
		return 0
	}
	return o.shape.get().CachedFraction
}

// planWeights is the plans' weights by row.
func planWeights(plans []plan) map[string]map[string]float64 {
	out := make(map[string]map[string]float64, len(plans))
	for _, pl := range plans {
		out[pl.row] = pl.weights
	}
	return out
}
