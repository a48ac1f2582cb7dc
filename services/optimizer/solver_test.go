package optimizer

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
)

// TestSolverKeptPerFleet: the loop's kept solver (optimize.Solver) gives
// the solution optimize.Solve gives for each solve's problem, before and
// after a fleet reload that changes network times under the same names
// (which the kept model would not see: setFleet starts a new solver).
func TestSolverKeptPerFleet(t *testing.T) {
	f := bigFleet(6, 40, 3)
	o := loadedOptimizer(t, f)
	check := func(what string, at int64) *solveResult {
		t.Helper()
		res, err := o.solve(time.Unix(at, 0))
		if err != nil {
			t.Fatal(err)
		}
		want, err := optimize.Solve(res.problem, optimize.Options{Previous: o.prev.solution, ChurnMs: o.cfg.ChurnMs,
			Tolerance: o.cfg.Tolerance, MaxNewtonSteps: o.cfg.MaxNewtonSteps})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := mustJSON(t, res.sol), mustJSON(t, want); !bytes.Equal(a, b) {
			t.Fatalf("%s: the loop's solution differs from optimize.Solve's:\n%s\n%s", what, a, b)
		}
		return res
	}
	before := check("same fleet", 1)
	g := bigFleet(6, 40, 3)
	for a, row := range g.NetworkMs {
		for b := range row {
			if a != b {
				row[b] *= 4 // far regions much farther: traffic stays home
			}
		}
	}
	o.setFleet(g)
	after := check("network times changed", 2)
	if bytes.Equal(mustJSON(t, before.sol.Weights), mustJSON(t, after.sol.Weights)) {
		t.Fatal("the new network times did not change the weights: the test checks nothing")
	}
	o.setFleet(schemas.ExampleFleetOneModel())
	check("another fleet", 3)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
