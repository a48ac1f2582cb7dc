package optimize_test

import (
	"fmt"
	"os"

	"github.com/ilb-router/ilb/solver/optimize"
)

// The talk's example: cluster A (90 rps) sits next to engine a, cluster B
// (120 rps) next to engine b, and both engines hold 100 rps. Sending each
// cluster to its nearest engine would push b past its cap; the optimum
// spreads load so every used route has the same marginal latency, moving
// B's excess (and some of A's traffic) to the farther engine c, whose
// network time costs less than the queueing it avoids.
func ExampleSolve() {
	data, err := os.ReadFile("testdata/talk.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := optimize.ParseProblem(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	sol, err := optimize.Solve(p, optimize.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []string{"fe-a", "fe-b"} {
		w := sol.Weights[c]
		fmt.Printf("%s: a %.2f  b %.2f  c %.2f  shed %.2f\n", c, w["eng-a"], w["eng-b"], w["eng-c"], sol.ShedFraction[c])
	}
	for _, e := range []string{"eng-a", "eng-b", "eng-c"} {
		fmt.Printf("%s: %.1f rps\n", e, sol.EngineLoadRps[e])
	}
	fmt.Printf("mean latency %.1f ms, proven within %.0e of optimal\n", sol.ObjectiveMs, max(sol.Gap, 1e-12))
	// Output:
	// fe-a: a 0.78  b 0.00  c 0.22  shed 0.00
	// fe-b: a 0.00  b 0.58  c 0.42  shed 0.00
	// eng-a: 70.4 rps
	// eng-b: 70.0 rps
	// eng-c: 69.6 rps
	// mean latency 6361.7 ms, proven within 1e-12 of optimal
}

// An optimizer re-solves every few seconds as demand moves; a Solver
// keeps the model of the fleet between solves and gives the same
// solutions as Solve. At 240 rps from fe-b the fleet (three engines
// capped at 90 rps) is short, and the optimum sheds.
func ExampleSolver() {
	data, err := os.ReadFile("testdata/talk.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := optimize.ParseProblem(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	var s optimize.Solver
	opt := optimize.DefaultOptions()
	for _, demandB := range []float64{120, 150, 240} {
		p.Clusters[1].DemandRps = demandB // fe-b's demand moves
		sol, err := s.Resolve(p, opt)
		if err != nil {
			fmt.Println(err)
			return
		}
		w := sol.Weights["fe-b"]
		fmt.Printf("fe-b at %.0f rps: a %.2f  b %.2f  c %.2f  shed %.2f\n", demandB, w["eng-a"], w["eng-b"], w["eng-c"], sol.ShedFraction["fe-b"])
		opt.Previous = sol // warm start from the last solution
	}
	// Output:
	// fe-b at 120 rps: a 0.00  b 0.58  c 0.42  shed 0.00
	// fe-b at 150 rps: a 0.00  b 0.53  c 0.47  shed 0.00
	// fe-b at 240 rps: a 0.02  b 0.40  c 0.40  shed 0.19
}
