package optimize

import (
	"encoding/json"
	"os"
	"testing"
)

// TestSolveStopsOnCycle solves testdata/cycle.json, a churn solve whose
// Newton iteration reaches the rounding floor and then alternates between
// two points, so that its stall test never fires and it used to run to
// MaxNewtonSteps. With the cycle watch it stops within a few dozen steps,
// and its solution is bit for bit the one of the run that goes on to the
// budget, for an even budget and an odd one (the two points differ).
func TestSolveStopsOnCycle(t *testing.T) {
	p, in := cycleCase(t, "testdata/cycle.json")
	var ends [2][]byte
	for i, budget := range []int{2000, 2001} {
		opt := Options{Previous: in.Previous, ChurnMs: in.ChurnMs, Tolerance: 1e-6, MaxNewtonSteps: budget}
		got := solveJSON(t, p, opt, func(steps int) {
			if steps > 100 {
				t.Errorf("budget %d: %d Newton steps, want the cycle found within 100", budget, steps)
			}
		})
		opt.keepCycling = true
		full := solveJSON(t, p, opt, func(steps int) {
			if steps != budget {
				t.Fatalf("budget %d: the full run took %d steps: the case no longer cycles, the test needs another", budget, steps)
			}
		})
		if string(got) != string(full) {
			t.Errorf("budget %d: stopping on the cycle changed the solution:\n%s\nthe full run's:\n%s", budget, got, full)
		}
		ends[i] = full
	}
	if string(ends[0]) == string(ends[1]) {
		t.Error("even and odd budgets end on the same point: the case does not test the parity")
	}
}

// solveJSON solves p, passes the Newton step count to check, and returns
// the solution as JSON without it.
func solveJSON(t *testing.T, p *Problem, opt Options, check func(steps int)) []byte {
	t.Helper()
	sol, err := Solve(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	check(sol.NewtonSteps)
	sol.NewtonSteps = 0
	out, err := json.Marshal(sol)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSolveStopsOnLongerCycle solves testdata/cycle-x10.json, a churn
// solve of the backtester at ten times the scale whose Newton iteration
// goes round more than two points (the soft arcs' cap doubling and
// halving with it) and ran all 2,000 steps before cycleWatch recognised
// rounds longer than two: it now stops within a hundred steps, on the
// very solution of the run that goes on to the budget, whatever the
// budget's remainder.
func TestSolveStopsOnLongerCycle(t *testing.T) {
	p, in := cycleCase(t, "testdata/cycle-x10.json")
	for _, budget := range []int{2000, 2001, 2002, 2003} {
		opt := Options{Previous: in.Previous, ChurnMs: in.ChurnMs, Tolerance: 1e-6, MaxNewtonSteps: budget}
		got := solveJSON(t, p, opt, func(steps int) {
			if steps > 100 {
				t.Errorf("budget %d: %d Newton steps, want the round found within 100", budget, steps)
			}
		})
		opt.keepCycling = true
		full := solveJSON(t, p, opt, func(steps int) {
			if steps != budget {
				t.Fatalf("budget %d: the full run took %d steps: the case no longer cycles, the test needs another", budget, steps)
			}
		})
		if string(got) != string(full) {
			t.Errorf("budget %d: stopping on the round changed the solution", budget)
		}
	}
}

// cycleSolve is a recorded churn solve: the previous solution and the
// churn price it was solved with.
type cycleSolve struct {
	ChurnMs  float64         `json:"churn_ms"`
	Problem  json.RawMessage `json:"problem"`
	Previous *Solution       `json:"previous"`
}

// cycleCase reads a recorded churn solve and parses its problem.
func cycleCase(t *testing.T, path string) (*Problem, cycleSolve) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var in cycleSolve
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	p, err := ParseProblem(in.Problem)
	if err != nil {
		t.Fatal(err)
	}
	return p, in
}
