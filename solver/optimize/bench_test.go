package optimize

import (
	"fmt"
	"testing"
)

// benchSizes are the fleet sizes of BenchmarkSolve, clusters x engines.
var benchSizes = [][2]int{{10, 50}, {100, 1000}, {300, 3000}}

func benchFleet(b testing.TB, clusters, engines int) *Problem {
	return randomFleet(b, newRand(uint64(clusters*7919+engines)), fleetSpec{
		clusters: clusters, engines: engines, load: 0.7,
		regions: min(30, max(5, clusters/4)), restricted: 0.1,
	})
}

// BenchmarkSolve solves random fleets with real inter-region RTTs cold, as
// the first solve of an optimizer would.
func BenchmarkSolve(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(b *testing.B) {
			p := benchFleet(b, sz[0], sz[1])
			b.ReportAllocs()
			var sol *Solution
			for b.Loop() {
				var err error
				if sol, err = Solve(p, DefaultOptions()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(sol.Gap, "gap")
			b.ReportMetric(float64(sol.NewtonSteps), "newton-steps")
		})
	}
}

// BenchmarkSolveWarm re-solves after a 5% demand change, warm-started from
// the previous solution, as the optimizer does every few seconds.
func BenchmarkSolveWarm(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(b *testing.B) {
			p := benchFleet(b, sz[0], sz[1])
			prev, err := Solve(p, DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			q := perturbDemand(p, newRand(7), 0.05)
			opt := DefaultOptions()
			opt.Previous = prev
			b.ReportAllocs()
			var sol *Solution
			for b.Loop() {
				if sol, err = Solve(q, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(sol.Gap, "gap")
			b.ReportMetric(float64(sol.NewtonSteps), "newton-steps")
		})
	}
}
