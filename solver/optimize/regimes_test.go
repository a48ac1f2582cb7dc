package optimize

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// regime is one shape of benchmark fleet: how loaded it is and how
// eligibility restricts it.
type regime struct {
	name string
	// load is total demand over the fleet's total load cap: above 1 the
	// fleet must shed.
	load float64
	// near is the share of clusters restricted to engines within 100 ms;
	// holes the share restricted to a random half of the engines.
	near, holes float64
	// classes, when set, splits every cluster into request classes
	// (model × context band) with their own eligible engines.
	classes bool
}

// The regimes of BenchmarkSolve. slack is the fleet the benchmark always
// had; overloaded asks 5% more than the fleet's load cap, so shedding is
// active at the optimum; eligible restricts a fifth of the clusters to a
// random half of the engines (holes the restriction by distance does not
// make); overloaded+eligible is both, the case issue 15 measured from
// outside; classes is the request-class model of issue 14.
var (
	regimeSlack      = regime{name: "slack", load: 0.7, near: 0.1}
	regimeOverloaded = regime{name: "overloaded", load: 1.05, near: 0.1}
	regimeEligible   = regime{name: "eligible", load: 0.7, holes: 0.2}
	regimeBoth       = regime{name: "overloaded+eligible", load: 1.05, holes: 0.2}
	regimeClasses    = regime{name: "classes", load: 0.7, classes: true}
)

// regimeFleet is the benchmark fleet of a regime at a size. Clusters and
// engines sit in real Azure regions as in randomFleet; the seed depends
// on the size only, so every regime of a size has the same engines and
// network times.
func regimeFleet(tb testing.TB, r regime, clusters, engines int) *Problem {
	rng := newRand(uint64(clusters*7919 + engines))
	spec := fleetSpec{clusters: clusters, engines: engines, load: r.load,
		regions: min(30, max(5, clusters/4)), restricted: r.near}
	if r.classes {
		return classFleet(tb, rng, spec)
	}
	p := randomFleet(tb, rng, spec)
	if r.holes > 0 {
		punchHoles(p, newRand(uint64(engines)), r.holes)
	}
	return p
}

// punchHoles restricts a share of p's clusters (those not restricted
// already) to a random half of the engines.
func punchHoles(p *Problem, rng *rand.Rand, share float64) {
	if p.Eligible == nil {
		p.Eligible = map[string][]string{}
	}
	for _, c := range p.Clusters {
		if _, ok := p.Eligible[c.Name]; ok || rng.Float64() >= share {
			continue
		}
		var elig []string
		for _, e := range p.Engines {
			if rng.IntN(2) == 0 {
				elig = append(elig, e.Name)
			}
		}
		p.Eligible[c.Name] = elig
	}
}

// Request classes: every engine serves one of classModels models; the
// longer the context band, the fewer of a model's engines can take it
// (bandReach of them, by engine index). A class's demand is its cluster's
// times its model's share times its band's.
var (
	classModels = 4
	bandShare   = []float64{0.6, 0.3, 0.1}
	bandReach   = []float64{1, 2.0 / 3, 1.0 / 3}
)

// classFleet is issue 14's request-class model as `ilb solve` takes it:
// engines list their model and context limit, clusters give their demand
// as demand rows per (model, band), and Expand turns each row into a
// solver cluster eligible only for the engines serving its model that
// reach its band, all sharing the engines' capacity and the cluster's
// network times: spec.clusters × classModels × len(bandShare) rows.
// Engine i serves model i mod classModels; of each model's engines the
// first bandReach[b] reach band b (context limits classLimits). Base
// eligibility is dropped, so every row's engines are exactly
// classEngines (TestClassFleetExpands checks it).
func classFleet(tb testing.TB, rng *rand.Rand, spec fleetSpec) *Problem {
	base := randomFleet(tb, rng, spec)
	p := *base
	p.Engines = slices.Clone(base.Engines)
	p.Eligible = nil
	perModel := len(p.Engines) / classModels
	for i := range p.Engines {
		e := &p.Engines[i]
		e.Models = []string{classModel(i % classModels)}
		e.MaxContextTokens = classLimits[len(classLimits)-1]
		for b := len(bandReach) - 1; b >= 0; b-- {
			if float64(i/classModels) < bandReach[b]*float64(perModel) {
				e.MaxContextTokens = classLimits[b]
				break
			}
		}
	}
	modelShare := make([]float64, classModels)
	sum := 0.0
	for m := range modelShare {
		modelShare[m] = 0.8 + 0.4*rng.Float64()
		sum += modelShare[m]
	}
	p.Clusters = slices.Clone(base.Clusters)
	for i, c := range base.Clusters {
		for m := range classModels {
			lo := 0
			for b, share := range bandShare {
				p.Demands = append(p.Demands, Demand{Cluster: c.Name, Model: classModel(m), MinPromptTokens: lo,
					MaxPromptTokens: classLimits[b], DemandRps: c.DemandRps * modelShare[m] / sum * share})
				lo = classLimits[b]
			}
		}
		p.Clusters[i].DemandRps = 0
	}
	q, err := p.Expand()
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// classLimits are the context limits of the bands: an engine reaching
// band b has limit classLimits[b] (0: none, the last band).
var classLimits = []int{8192, 32768, 0}

func classModel(m int) string { return fmt.Sprintf("model-%d", m) }

// classEngines lists the engines serving model m that reach band b:
// engine i serves model i mod classModels, and the first bandReach[b] of
// each model's engines reach band b.
func classEngines(p *Problem, m, b int) []string {
	var out []string
	perModel := len(p.Engines) / classModels
	for i := m; i < len(p.Engines); i += classModels {
		if float64(i/classModels) < bandReach[b]*float64(perModel) {
			out = append(out, p.Engines[i].Name)
		}
	}
	return out
}
