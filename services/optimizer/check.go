package optimizer

import (
	"fmt"

	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
)

// The last gate before publishing and the shaping of each cluster's
// weights and table are routing's (CheckSolution, Normalize, Table), so
// the backtester publishes what this service would.

// checkSolution rejects a solution that must not be published
// (routing.CheckSolution); the error wraps routing.ErrRejected.
func checkSolution(p *optimize.Problem, sol *optimize.Solution) error {
	if err := routing.CheckSolution(p, sol); err != nil {
		return fmt.Errorf("optimizer: %w", err)
	}
	return nil
}

// normalize drops weights under routing.WeightFloor and rescales the rest
// to sum to 1 − shed (routing.Normalize).
func normalize(w map[string]float64, shed float64) (map[string]float64, float64) {
	return routing.Normalize(w, shed)
}

// buildTable derives a cluster's selection table from its previous one
// with the fewest slot moves, over the engines with positive weight
// (routing.Table); nil when no engine has weight. For a served snapshot
// without a table it lays out the slots the data plane does: a data plane
// also lists engines of weight 0, which own no slot and so change nothing
// in the next update.
func buildTable(prev *sched.Table, weights map[string]float64) (*sched.Table, error) {
	return routing.Table(prev, weights)
}

// plan is what one demand row (a cluster's class; the cluster itself in
// a fleet of one class) gets in a snapshot.
type plan struct {
	row     string             // the row's name
	cluster int                // its fleet cluster index
	weights map[string]float64 // sums to 1 − shed exactly (to rounding)
	shed    float64
	table   *sched.Table // nil when everything is shed
	kept    bool         // idle cluster: the previous weights were kept
}
