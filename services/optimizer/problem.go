package optimizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
)

// errNoEngine: every engine is derated to zero (routing.ErrNoEngine):
// nothing is published and the data planes keep their last snapshot and
// their own guardrails.
var errNoEngine = routing.ErrNoEngine

// buildProblem turns the fleet, the engines' derated capacities and the
// demand estimates (by row name) into the solver's problem with
// routing.BuildProblem, which the backtester runs too: engines sorted by
// name, one solver cluster per demand row in fleet order, an engine
// without capacity left out, and a row may use only engines that are in
// the problem, eligible (residency), reachable and serving its class.
// The fleet's mean_output_tokens is the mean answer.
func buildProblem(f *schemas.Fleet, rows *routing.Rows, caps []engineCap, demand map[string]float64) (*optimize.Problem, error) {
	engines := make([]optimize.Engine, len(f.Engines))
	for _, c := range caps {
		if i := slices.IndexFunc(f.Engines, func(e schemas.FleetEngine) bool { return e.Name == c.fleet.Name }); i >= 0 {
			engines[i] = c.profile.engine
			engines[i].CapacityRps = c.capacity()
		}
	}
	dem := make([]float64, rows.Len())
	for r, rw := range rows.Rows {
		dem[r] = demand[rw.Name]
	}
	return routing.BuildProblem(f, rows, engines, dem, f.MeanOutputTokens)
}

// digest identifies a problem: the first 16 hex digits of the SHA-256 of
// its JSON (map keys sorted by encoding/json, so it is deterministic).
func digest(p *optimize.Problem) string {
	b, err := json.Marshal(p)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// sortedKeys returns m's keys in ascending order (nil for an empty m),
// so that output never depends on map order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
