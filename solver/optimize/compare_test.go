package optimize

import (
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// tangentLP is the outer linearisation of a problem: each engine's cost
// F_e is replaced by the maximum of tangents at cutsPerEngine loads, an LP
// whose optimum is a lower bound on the true optimum, and whose solution's
// flows, costed exactly, give an upper bound.
type tangentLP struct {
	p      *Problem
	arcs   [][2]int // (cluster, engine)
	cuts   []float64
	engine []engineCost
}

func newTangentLP(p *Problem, cutsPerEngine int) *tangentLP {
	m := newModel(p)
	t := &tangentLP{p: p, engine: m.eng}
	for c := range m.nc {
		lo, hi := m.arcs(c)
		for a := lo; a < hi; a++ {
			t.arcs = append(t.arcs, [2]int{c, int(m.arcEng[a])})
		}
	}
	// Cut points crowd toward the cap, where F bends most.
	for k := range cutsPerEngine {
		r := float64(k) / float64(cutsPerEngine-1)
		t.cuts = append(t.cuts, 1-(1-r)*(1-r))
	}
	return t
}

// solve returns the LP's lower bound and the exact cost of its flows, both
// in ms per request, using gonum's dense simplex (small problems only).
func (t *tangentLP) solve() (lower, upper float64, err error) {
	p, nc, ne, na := t.p, len(t.p.Clusters), len(t.p.Engines), len(t.arcs)
	nk := len(t.cuts)
	// Variables: x (na), shed (nc), tcost (ne), cut slacks (ne·nk), cap slacks (ne).
	nv := na + nc + ne + ne*nk + ne
	rows := nc + ne*nk + ne
	a := mat.NewDense(rows, nv, nil)
	b := make([]float64, rows)
	cost := make([]float64, nv)
	net := newModel(p)
	for i, arc := range t.arcs {
		lo, _ := net.arcs(arc[0])
		for k := lo; ; k++ {
			if int(net.arcEng[k]) == arc[1] {
				cost[i] = net.arcNet[k]
				break
			}
		}
		a.Set(arc[0], i, 1)
	}
	for c := range nc {
		a.Set(c, na+c, 1)
		b[c] = p.Clusters[c].DemandRps
		cost[na+c] = p.ShedPenaltyMs
	}
	for e := range ne {
		f := &t.engine[e]
		cost[na+nc+e] = 1
		for k, r := range t.cuts {
			// t_e − F'(λk)·Σx − slack = F(λk) − F'(λk)·λk
			l := r * f.u
			d1, _ := f.marginal(l)
			row := nc + e*nk + k
			a.Set(row, na+nc+e, 1)
			for i, arc := range t.arcs {
				if arc[1] == e {
					a.Set(row, i, -d1)
				}
			}
			a.Set(row, na+nc+ne+e*nk+k, -1)
			b[row] = f.cost(l) - d1*l
		}
		row := nc + ne*nk + e // Σx + slack = u
		for i, arc := range t.arcs {
			if arc[1] == e {
				a.Set(row, i, 1)
			}
		}
		a.Set(row, na+nc+ne+ne*nk+e, 1)
		b[row] = f.u
	}
	opt, x, err := lp.Simplex(cost, a, b, 1e-10, nil)
	if err != nil {
		return 0, 0, err
	}
	total := 0.0
	for _, c := range p.Clusters {
		total += c.DemandRps
	}
	load := make([]float64, ne)
	exact := 0.0
	for i, arc := range t.arcs {
		exact += x[i] * cost[i]
		load[arc[1]] += x[i]
	}
	for c := range nc {
		exact += x[na+c] * p.ShedPenaltyMs
	}
	for e := range ne {
		exact += t.engine[e].cost(min(load[e], t.engine[e].u))
	}
	return opt / total, exact / total, nil
}

// TestSolveMatchesTangentLP compares Solve with an independent method on
// small random fleets: the tangent-cut LP solved by gonum's simplex brackets
// the true optimum, LP ≤ optimum ≤ cost of the LP's flows, and Solve's
// objective must lie in the bracket (up to its own gap), as must its
// certified lower bound below the bracket's top.
func TestSolveMatchesTangentLP(t *testing.T) {
	for seed := range uint64(6) {
		rng := newRand(seed + 1000)
		p := randomFleet(t, rng, fleetSpec{clusters: 2 + rng.IntN(2), engines: 2 + rng.IntN(2),
			load: 0.4 + 0.8*rng.Float64(), regions: 3, restricted: 0})
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sol, err := Solve(p, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			lower, upper, err := newTangentLP(p, 30).solve()
			if err != nil {
				t.Fatal(err)
			}
			tol := 1e-9 * upper
			if sol.ObjectiveMs < lower-tol || sol.ObjectiveMs > upper+tol {
				t.Errorf("objective %.9f outside the LP bracket [%.9f, %.9f]", sol.ObjectiveMs, lower, upper)
			}
			if sol.LowerBoundMs > upper+tol {
				t.Errorf("certified bound %.9f above a feasible cost %.9f", sol.LowerBoundMs, upper)
			}
			if rel := (upper - lower) / upper; rel > 1e-3 {
				t.Errorf("LP bracket too loose to check anything: %.2g", rel)
			}
			t.Logf("LP %.6f ≤ solve %.6f ≤ LP flows %.6f", lower, sol.ObjectiveMs, upper)
		})
	}
}

// TestSolveBeatsEveryGridPoint brute-forces a 1-cluster, 3-engine problem
// on a grid of splits: no split costs less than Solve's answer.
func TestSolveBeatsEveryGridPoint(t *testing.T) {
	e := []Engine{engine("a", 60, 150, 40, 20, 15), engine("b", 80, 120, 60, 18, 10), engine("c", 120, 200, 30, 25, 5)}
	p := one([]float64{140}, e, [][]float64{{2, 30, 70}}, 200, 0.95, 60000)
	sol := solveOK(t, p)
	const n = 200
	best := math.Inf(1)
	for i := 0; i <= n; i++ {
		for j := 0; i+j <= n; j++ {
			xa, xb := 140*float64(i)/n, 140*float64(j)/n
			xc := 140 - xa - xb
			if xa > 57 || xb > 76 || xc > 114 {
				continue
			}
			best = min(best, costOf(p, map[string]map[string]float64{"A": {"a": xa, "b": xb, "c": xc}}, 0))
		}
	}
	if sol.ObjectiveMs > best+1e-9*best {
		t.Fatalf("grid point %.9f beats Solve %.9f", best, sol.ObjectiveMs)
	}
	if best-sol.ObjectiveMs > 1e-3*best {
		t.Fatalf("grid %.9f far above Solve %.9f: the grid or the check is wrong", best, sol.ObjectiveMs)
	}
}
