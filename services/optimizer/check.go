package optimizer

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
)

// errRejected wraps every reason a solution is not published.
var errRejected = errors.New("optimizer: solution rejected")

// Tolerances of checkSolution. The solver certifies its answer to
// Config.Tolerance in objective; its weights sum to 1 − shed to rounding.
const (
	sumTolerance  = 1e-6 // |Σ weights + shed − 1|
	loadTolerance = 1e-6 // relative excess of an engine's load over its cap
	// weightFloor: weights below it are dropped (they would own no slot of
	// the selection table anyway: one slot is 1/65536 ≈ 1.5e-5).
	weightFloor = 1e-7
)

// checkSolution is the last gate before publishing: every cluster has
// finite weights in [0, 1] and a shed fraction in [0, 1] that sum to 1,
// only on engines the problem lets it use, and no engine is loaded past
// its capacity cap. A solution that fails is not published.
func checkSolution(p *optimize.Problem, sol *optimize.Solution) error {
	if sol == nil {
		return fmt.Errorf("%w: no solution", errRejected)
	}
	for _, c := range p.Clusters {
		if err := checkCluster(p, sol, c.Name); err != nil {
			return fmt.Errorf("%w: cluster %s: %w", errRejected, c.Name, err)
		}
	}
	for _, e := range p.Engines {
		load := sol.EngineLoadRps[e.Name]
		limit := e.CapacityRps * p.MaxUtilization
		if !isFinite(load) || load < 0 || load > limit*(1+loadTolerance)+1e-12 {
			return fmt.Errorf("%w: engine %s: load %v rps, cap %v", errRejected, e.Name, load, limit)
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
	for _, e := range sortedKeys(w) {
		v := w[e]
		if !isFinite(v) || v < 0 || v > 1 {
			return fmt.Errorf("engine %s: weight %v", e, v)
		}
		if v > 0 && !slices.Contains(p.Eligible[cluster], e) {
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

// plan is what one cluster gets in a snapshot.
type plan struct {
	cluster string
	weights map[string]float64 // sums to 1 − shed exactly (to rounding)
	shed    float64
	table   *sched.Table // nil when everything is shed
	kept    bool         // idle cluster: the previous weights were kept
}

// normalize drops weights under weightFloor and rescales the rest so they
// sum to 1 − shed, removing the solver's rounding. With no weight left the
// cluster sheds everything.
func normalize(w map[string]float64, shed float64) (map[string]float64, float64) {
	out := map[string]float64{}
	sum := 0.0
	for _, e := range sortedKeys(w) {
		if w[e] >= weightFloor {
			out[e] = w[e]
			sum += w[e]
		}
	}
	if sum == 0 || shed >= 1 {
		return map[string]float64{}, 1
	}
	scale := (1 - shed) / sum
	for e := range out {
		out[e] *= scale
	}
	return out, shed
}

// buildTable derives the cluster's selection table from its previous one
// with the fewest slot moves (sched.Update), or lays one out the first
// time. Engines without weight are not listed, so they own no slot.
func buildTable(prev *sched.Table, weights map[string]float64) (*sched.Table, error) {
	names := sortedKeys(weights)
	if len(names) == 0 {
		return nil, nil
	}
	ws := make([]float64, len(names))
	for i, n := range names {
		ws[i] = weights[n]
	}
	return sched.Rebalance(prev, names, ws)
}
