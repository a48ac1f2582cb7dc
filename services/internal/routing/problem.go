package routing

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
)

// ErrNoEngine: every engine is derated to zero. Publishing "shed
// everything" on the strength of the signals alone would turn a reporting
// outage into a full outage, so callers publish nothing and the data
// planes keep their last snapshot and their own guardrails.
var ErrNoEngine = errors.New("no engine has capacity (all unhealthy, silent or without ready replicas)")

// MinCapacityRPS is the capacity below which a derated engine is left out
// of the problem rather than offered to the solver as a sliver.
const MinCapacityRPS = 1e-6

// BuildProblem turns the fleet, its engines' profiles with their derated
// capacities (engines, by fleet engine index; names are taken from the
// fleet) and each demand row's demand (by row index of rows, NewRows(f))
// into the solver's problem: one solver cluster per row, named Row.Name.
// Engines are sorted by name, rows kept in order; an engine below
// MinCapacityRPS is left out, and a row may use only engines that are in
// the problem, eligible for its cluster (residency), reachable (a
// network_ms pair between their regions) and serving its class (the same
// rule as optimize.Problem.Expand). Each engine's load is capped where
// its modelled TBOT reaches the fleet's tbot_slo_ms (SLOLoad). meanOutputTokens is the fleet's
// mean_output_tokens, or an observed mean. The problem is validated.
func BuildProblem(f *schemas.Fleet, rows *Rows, engines []optimize.Engine, demand []float64, meanOutputTokens float64) (*optimize.Problem, error) {
	var b Builder
	return b.Build(f, rows, engines, demand, meanOutputTokens)
}

// Builder is BuildProblem for a caller that builds problems of one fleet
// again and again (a solve loop, the backtester's control ticks): it keeps
// the routes (network_ms and eligible) of its last problem and hands them
// to the next one when the same engines are in it, which is every time
// unless an engine's derated capacity crosses MinCapacityRPS. The
// problems are BuildProblem's, value for value; those built from the same
// routes share the routes' maps, so nobody may modify them (the solver
// and CheckSolution only read them). The fleet and rows must not change
// between builds. The zero Builder is ready; it is not safe for
// concurrent use.
type Builder struct {
	in   []int // the fleet indices of the engines the routes were built for, in problem order
	net  map[string]map[string]float64
	elig map[string][]string
	idx  []int // scratch: this build's engines, by fleet index
	// valid: a problem with these routes passed Validate. Its names (the
	// rows', the engines') and routes are every such problem's, so
	// another one passes too exactly when its numbers are in range
	// (numbersValid); Validate runs only when they are not, for its error.
	valid bool
}

// Build is BuildProblem(f, rows, engines, demand, meanOutputTokens).
func (b *Builder) Build(f *schemas.Fleet, rows *Rows, engines []optimize.Engine, demand []float64, meanOutputTokens float64) (*optimize.Problem, error) {
	p := &optimize.Problem{
		MeanOutputTokens: meanOutputTokens,
		MaxUtilization:   f.MaxUtilization,
		ShedPenaltyMs:    f.ShedPenaltyMs,
		Engines:          make([]optimize.Engine, 0, min(len(f.Engines), len(engines))),
	}
	b.idx = b.idx[:0]
	for i, fe := range f.Engines {
		if i >= len(engines) || !(engines[i].CapacityRps >= MinCapacityRPS) {
			continue
		}
		e := engines[i]
		e.Name = fe.Name
		e.MaxLoadRps = SLOLoad(e, f.TBOTSLOMs, f.MaxUtilization)
		p.Engines = append(p.Engines, e)
		b.idx = append(b.idx, i)
	}
	if len(p.Engines) == 0 {
		return nil, ErrNoEngine
	}
	// Sorting the indices with the engines keeps each engine's fleet index
	// (a fleet's engine names are distinct, so the order is the names').
	slices.SortFunc(b.idx, func(i, j int) int { return cmp.Compare(f.Engines[i].Name, f.Engines[j].Name) })
	slices.SortFunc(p.Engines, func(a, b optimize.Engine) int { return cmp.Compare(a.Name, b.Name) })
	p.Clusters = make([]optimize.Cluster, 0, len(rows.Rows))
	for r, rw := range rows.Rows {
		d := 0.0
		if r < len(demand) {
			d = demand[r]
		}
		p.Clusters = append(p.Clusters, optimize.Cluster{Name: rw.Name, DemandRps: d})
	}
	if b.net == nil || !slices.Equal(b.in, b.idx) {
		b.routes(f, rows)
		b.valid = false
	}
	p.NetworkMs, p.Eligible = b.net, b.elig
	if b.valid && numbersValid(p) {
		return p, nil
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b.valid = true
	return p, nil
}

// numbersValid reports whether every number of p is one Validate accepts
// and p has clusters and engines: with names and routes that passed
// Validate before, p then passes it too.
func numbersValid(p *optimize.Problem) bool {
	ok := func(v float64) bool { return v >= 0 && v <= optimize.MaxValue } // false for NaN
	if !ok(p.MeanOutputTokens) || !ok(p.ShedPenaltyMs) || !(p.MaxUtilization > 0 && p.MaxUtilization < 1) ||
		len(p.Clusters) == 0 || len(p.Engines) == 0 || len(p.Demands) > 0 {
		return false
	}
	for _, c := range p.Clusters {
		if !ok(c.DemandRps) {
			return false
		}
	}
	for _, e := range p.Engines {
		if !ok(e.CapacityRps) || !ok(e.MaxLoadRps) || !ok(e.TTFT.BaseMs) || !ok(e.TTFT.QueueMs) || !ok(e.TBOT.BaseMs) || !ok(e.TBOT.SlopeMs) {
			return false
		}
	}
	return true
}

// routes builds the network times and eligible lists of every row over
// the engines b.idx (fleet indices, in problem order).
func (b *Builder) routes(f *schemas.Fleet, rows *Rows) {
	b.in = append(b.in[:0], b.idx...)
	b.net, b.elig = map[string]map[string]float64{}, map[string][]string{}
	for _, rw := range rows.Rows {
		fc := f.Clusters[rw.Cluster]
		net := map[string]float64{}
		elig := []string{}
		for _, i := range b.in {
			fe := f.Engines[i]
			ms, ok := f.NetworkMsBetween(fc.Region, fe.Region)
			if ok && f.Eligible(fc, fe) && rows.Serves(rw.Class, i) {
				net[fe.Name] = ms
				elig = append(elig, fe.Name)
			}
		}
		b.net[rw.Name] = net
		b.elig[rw.Name] = elig
	}
}

// ErrRejected wraps every reason CheckSolution rejects a solution.
var ErrRejected = errors.New("solution rejected")

// Tolerances of CheckSolution and Normalize. The solver certifies its
// answer to a tolerance in objective; its weights sum to 1 − shed to
// rounding.
const (
	sumTolerance  = 1e-6 // |Σ weights + shed − 1|
	loadTolerance = 1e-6 // relative excess of an engine's load over its cap
	// WeightFloor: Normalize drops weights below it (they would own no
	// slot of a selection table anyway: one slot is 1/65536 ≈ 1.5e-5).
	WeightFloor = 1e-7
)

// CheckSolution is the last gate before publishing: every cluster has
// finite weights in [0, 1] and a shed fraction in [0, 1] that sum to 1,
// only on engines the problem lets it use, and no engine is loaded past
// its capacity cap. A solution that fails is not published.
func CheckSolution(p *optimize.Problem, sol *optimize.Solution) error {
	if sol == nil {
		return fmt.Errorf("%w: no solution", ErrRejected)
	}
	for _, c := range p.Clusters {
		if err := checkCluster(p, sol, c.Name); err != nil {
			return fmt.Errorf("%w: cluster %s: %w", ErrRejected, c.Name, err)
		}
	}
	for _, e := range p.Engines {
		load := sol.EngineLoadRps[e.Name]
		limit := e.LoadCap(p.MaxUtilization)
		if !isFinite(load) || load < 0 || load > limit*(1+loadTolerance)+1e-12 {
			return fmt.Errorf("%w: engine %s: load %v rps, cap %v", ErrRejected, e.Name, load, limit)
		}
	}
	return nil
}

func checkCluster(p *optimize.Problem, sol *optimize.Solution, cluster string) error {
	w, ok := sol.Weights[cluster]
	if !ok {
		return errors.New("no weights")
	}
	shed, ok := sol.ShedFraction[cluster]
	if !ok || !isFinite(shed) || shed < 0 || shed > 1 {
		return fmt.Errorf("shed fraction %v", shed)
	}
	sum := shed
	elig := p.Eligible[cluster]
	// BuildProblem lists them sorted (its engines are): then a weight's
	// engine is found by binary search, not by reading up to 1,000 names.
	sorted := slices.IsSorted(elig)
	may := func(e string) bool {
		if sorted {
			_, ok := slices.BinarySearch(elig, e)
			return ok
		}
		return slices.Contains(elig, e)
	}
	for _, e := range sortedKeys(w) {
		v := w[e]
		if !isFinite(v) || v < 0 || v > 1 {
			return fmt.Errorf("engine %s: weight %v", e, v)
		}
		if v > 0 && !may(e) {
			return fmt.Errorf("engine %s: weight %v on an engine it may not use", e, v)
		}
		sum += v
	}
	if math.Abs(sum-1) > sumTolerance {
		return fmt.Errorf("weights and shed sum to %v, want 1", sum)
	}
	return nil
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Normalize drops weights under WeightFloor and rescales the rest so they
// sum to 1 − shed, removing the solver's rounding. With no weight left the
// cluster sheds everything.
func Normalize(w map[string]float64, shed float64) (map[string]float64, float64) {
	keys := sortedKeys(w)
	split := make([]weighted, len(keys))
	for i, e := range keys {
		split[i] = weighted{e, w[e]}
	}
	return normalizeSplit(split, shed)
}

// Change is how far one cluster's routing moved: the total variation
// distance between two weight vectors with the shed fraction counted as
// one more weight. A solution is published when some cluster moved by at
// least the configured minimum change (or too long has passed).
func Change(a map[string]float64, shedA float64, b map[string]float64, shedB float64) float64 {
	return (math.Abs(shedA-shedB) + 2*sched.TotalVariation(a, b)) / 2
}

// sortedKeys returns m's keys in ascending order, so that output and
// floating-point sums never depend on map order.
// The slice is sized once (collecting an iterator grows it by doubling,
// four or five allocations for a cluster's dozen engines).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Anchor is the previous solution the solver's churn term and warm start
// use: the published weights and shed fractions by cluster, with the
// cluster prices of the solve that made them where known (prices may be
// nil). Nil when nothing is published.
func Anchor(weights map[string]map[string]float64, shed map[string]float64, prices map[string]float64) *optimize.Solution {
	if len(weights) == 0 {
		return nil
	}
	s := &optimize.Solution{Weights: map[string]map[string]float64{}, ShedFraction: map[string]float64{},
		ClusterPriceMs: map[string]float64{}}
	for c, w := range weights {
		s.Weights[c] = w
		s.ShedFraction[c] = shed[c]
		if v, ok := prices[c]; ok {
			s.ClusterPriceMs[c] = v
		}
	}
	return s
}

// Table derives a cluster's selection table from its previous one with
// the fewest slot moves (sched.Rebalance), or lays one out the first time,
// over the engines with positive weight in name order. Engines without
// weight are not listed, so they own no slot; nil when no engine has
// weight (everything shed).
func Table(prev *sched.Table, weights map[string]float64) (*sched.Table, error) {
	var t Tabler
	t.once = true
	return t.Table(prev, weights)
}

// Tabler is Table for a caller that updates tables again and again (a
// data plane swapping in snapshots, the backtester's control ticks): it
// keeps the update's working memory (sched.Updater) and the engine list
// between updates, so an update allocates little more than the new
// table. Its tables are Table's, bit for bit. The zero Tabler is ready;
// it is not safe for concurrent use.
type Tabler struct {
	u     sched.Updater
	names []string
	ws    []float64
	once  bool // a single update: sched.Rebalance, which lends the table its scratch
}

// Table is Table(prev, weights) with t's working memory.
func (t *Tabler) Table(prev *sched.Table, weights map[string]float64) (*sched.Table, error) {
	t.names = t.names[:0]
	for n, w := range weights {
		if w > 0 {
			t.names = append(t.names, n)
		}
	}
	slices.Sort(t.names)
	if len(t.names) == 0 {
		return nil, nil
	}
	t.ws = t.ws[:0]
	for _, n := range t.names {
		t.ws = append(t.ws, weights[n])
	}
	if t.once {
		return sched.Rebalance(prev, t.names, t.ws)
	}
	return t.u.Rebalance(prev, t.names, t.ws)
}
