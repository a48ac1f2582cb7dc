package optimize

import (
	"fmt"
	"math"
	"testing"
)

// sheddingGolden is what Solve returned on main before the tie method
// (commit dd47a0a) for overloaded benchmark fleets, where shedding is
// part of the optimum: its objective, its proven lower bound, its gap,
// and the total shed in rps. Two of the four runs stopped short of the
// tolerance (gap about 1e-6: the proximal rounds stalled at the κ floor).
var sheddingGolden = []struct {
	regime      regime
	nc, ne      int
	obj, bound  float64
	gap, shedRp float64
}{
	{regimeOverloaded, 30, 300, 10255.673557161113, 10255.673557161108, 5.47002e-16, 1517.8494062324489},
	{regimeBoth, 30, 300, 10256.977773719533, 10256.949657985564, 2.74113e-06, 1517.8693328015449},
	{regimeOverloaded, 100, 1000, 10349.345337192646, 10349.332588080806, 1.23188e-06, 4881.8132614485603},
	{regimeBoth, 100, 1000, 10349.372733049207, 10349.372733049198, 7.86495e-16, 4881.7853276468059},
}

// A solve with shedding active returns the optimum the previous solver
// certified: the new objective lies between the old run's lower bound and
// its objective (it is the optimum, up to rounding, when the old run
// closed its gap), the new certificate closes, and the total shed, which
// the optimum fixes (engine loads are unique), is the old one.
func TestSheddingOptimumUnchanged(t *testing.T) {
	for _, g := range sheddingGolden {
		t.Run(fmt.Sprintf("%dx%d/%s", g.nc, g.ne, g.regime.name), func(t *testing.T) {
			if testing.Short() && g.nc > 30 {
				t.Skip("large fleet")
			}
			p := regimeFleet(t, g.regime, g.nc, g.ne)
			sol, err := Solve(p, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			checkFeasible(t, p, sol, 1e-9)
			if sol.Gap > DefaultOptions().Tolerance {
				t.Errorf("gap %v", sol.Gap)
			}
			round := 1e-12 * g.obj
			if sol.ObjectiveMs < g.bound-round || sol.ObjectiveMs > g.obj+round {
				t.Errorf("objective %.17g outside the old certificate [%.17g, %.17g]", sol.ObjectiveMs, g.bound, g.obj)
			}
			shed := 0.0
			for _, cl := range p.Clusters {
				shed += sol.ShedFraction[cl.Name] * cl.DemandRps
			}
			if shed == 0 {
				t.Fatal("nothing shed: the fleet is not overloaded")
			}
			tol := 1e-9
			if g.gap > 1e-12 {
				tol = 1e-3 // the old run's flows were off by about the square root of its gap
			}
			if math.Abs(shed-g.shedRp) > tol*g.shedRp {
				t.Errorf("total shed %.12g rps, before %.12g", shed, g.shedRp)
			}
		})
	}
}
