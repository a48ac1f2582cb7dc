package optimize

import (
	"fmt"
	"testing"
)

// benchCase is one fleet of BenchmarkSolve: a size and a regime.
type benchCase struct {
	clusters, engines int
	regime            regime
}

func (c benchCase) name() string {
	return fmt.Sprintf("%dx%d/%s", c.clusters, c.engines, c.regime.name)
}

// benchCases are the fleets of BenchmarkSolve and BenchmarkSolveWarm: the
// slack fleet at three sizes, and at 100x1000 (and 300x3000) the regimes
// where the optimizer matters most: overloaded (shedding active),
// eligibility holes, both, and request classes (1,200 rows at 100x1000).
var benchCases = []benchCase{
	{10, 50, regimeSlack},
	{100, 1000, regimeSlack},
	{100, 1000, regimeOverloaded},
	{100, 1000, regimeEligible},
	{100, 1000, regimeBoth},
	{100, 1000, regimeClasses},
	{300, 3000, regimeSlack},
	{300, 3000, regimeBoth},
}

// BenchmarkSolve solves random fleets with real inter-region RTTs cold, as
// the first solve of an optimizer would.
func BenchmarkSolve(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name(), func(b *testing.B) {
			p := regimeFleet(b, bc.regime, bc.clusters, bc.engines)
			b.ReportAllocs()
			var sol *Solution
			clock := startCPU(b)
			for b.Loop() {
				var err error
				if sol, err = Solve(p, DefaultOptions()); err != nil {
					b.Fatal(err)
				}
			}
			clock.stop(b)
			reportSolution(b, sol)
		})
	}
}

// BenchmarkSolveWarm re-solves after a 5% demand change, warm-started from
// the previous solution, with a Solver that keeps its model between
// solves (Resolve), as the optimizer does every few seconds.
func BenchmarkSolveWarm(b *testing.B) {
	benchWarm(b, func(s *Solver, q *Problem, opt Options) (*Solution, error) { return s.Resolve(q, opt) })
}

// BenchmarkSolveWarmOneShot is BenchmarkSolveWarm with the package's
// Solve, which builds the model from the problem's maps every time (the
// warm figure of earlier versions).
func BenchmarkSolveWarmOneShot(b *testing.B) {
	benchWarm(b, func(_ *Solver, q *Problem, opt Options) (*Solution, error) { return Solve(q, opt) })
}

// benchWarm solves each fleet cold with a Solver, then re-solves it after
// a 5% demand change with solve, from the cold solution.
func benchWarm(b *testing.B, solve func(*Solver, *Problem, Options) (*Solution, error)) {
	for _, bc := range benchCases {
		b.Run(bc.name(), func(b *testing.B) {
			p := regimeFleet(b, bc.regime, bc.clusters, bc.engines)
			var s Solver
			prev, err := s.Solve(p, DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			q := perturbDemand(p, newRand(7), 0.05)
			opt := DefaultOptions()
			opt.Previous = prev
			b.ReportAllocs()
			var sol *Solution
			clock := startCPU(b)
			for b.Loop() {
				if sol, err = solve(&s, q, opt); err != nil {
					b.Fatal(err)
				}
			}
			clock.stop(b)
			reportSolution(b, sol)
		})
	}
}

func reportSolution(b *testing.B, sol *Solution) {
	b.ReportMetric(sol.Gap, "gap")
	b.ReportMetric(float64(sol.NewtonSteps), "newton-steps")
	b.ReportMetric(float64(sol.Rounds), "rounds")
	shed := 0.0
	for _, f := range sol.ShedFraction {
		shed = max(shed, f)
	}
	b.ReportMetric(shed, "max-shed")
}

// BenchmarkSolveRandom solves 12 random 100x1000 fleets of each regime
// cold, one operation being all 12 (seeds differ from the one fleet of
// BenchmarkSolve), and reports the most Newton steps any took: the
// benchmark fleets alone hid solves that took hundreds of steps.
func BenchmarkSolveRandom(b *testing.B) {
	for _, r := range []regime{regimeSlack, regimeOverloaded, regimeEligible, regimeBoth} {
		b.Run("100x1000/"+r.name, func(b *testing.B) {
			var fleets []*Problem
			for seed := range uint64(12) {
				p := randomFleet(b, newRand(1100+31*seed), fleetSpec{clusters: 100, engines: 1000,
					load: r.load, regions: 25, restricted: r.near})
				if r.holes > 0 {
					punchHoles(p, newRand(seed), r.holes)
				}
				fleets = append(fleets, p)
			}
			b.ReportAllocs()
			steps := 0
			clock := startCPU(b)
			for b.Loop() {
				for _, p := range fleets {
					sol, err := Solve(p, DefaultOptions())
					if err != nil {
						b.Fatal(err)
					}
					steps = max(steps, sol.NewtonSteps)
				}
			}
			clock.stop(b)
			b.ReportMetric(float64(steps), "max-newton-steps")
		})
	}
}

// BenchmarkBuildModel is the model build a cold Solve starts with: the
// Problem's maps read into the slot arrays (100x1000 slack fleet).
func BenchmarkBuildModel(b *testing.B) {
	p := regimeFleet(b, regimeSlack, 100, 1000)
	b.ReportAllocs()
	clock := startCPU(b)
	for b.Loop() {
		if _, ok := buildModel(p); !ok {
			b.Fatal("buildModel failed")
		}
	}
	clock.stop(b)
}
