package optimizer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
)

// bigFleet is a synthetic fleet of the example's engine types: clusters
// front-end clusters over regions regions, engines engines spread over
// them, every cluster able to use every engine.
func bigFleet(clusters, engines, regions int) *schemas.Fleet {
	base := schemas.ExampleFleetOneModel()
	f := &schemas.Fleet{MaxUtilization: 0.95, BlockTokens: 512, NetworkMs: map[string]map[string]float64{},
		TTFTSLOMs: 2000, MeanOutputTokens: 200, ShedPenaltyMs: 60000}
	rng := rand.New(rand.NewPCG(1, 2))
	for a := range regions {
		row := map[string]float64{}
		for b := range regions {
			row[fmt.Sprintf("r%d", b)] = 1
			if a != b {
				row[fmt.Sprintf("r%d", b)] = 20 + 130*rng.Float64()
			}
		}
		f.NetworkMs[fmt.Sprintf("r%d", a)] = row
	}
	for i := range clusters {
		f.Clusters = append(f.Clusters, schemas.FleetCluster{Name: fmt.Sprintf("fe-%03d", i),
			Region: fmt.Sprintf("r%d", i%regions), DemandShare: 0.5 + rng.Float64()})
	}
	for i := range engines {
		e := base.Engines[i%len(base.Engines)]
		e.Name, e.Region, e.Residency = fmt.Sprintf("eng-%04d", i), fmt.Sprintf("r%d", i%regions), ""
		f.Engines = append(f.Engines, e)
	}
	f.ApplyDefaults()
	return f
}

// loadedOptimizer returns an optimizer (not running) with one window of
// traffic at 60% of the fleet's capacity and a previous published state,
// ready for solve.
func loadedOptimizer(tb testing.TB, f *schemas.Fleet) *Optimizer {
	tb.Helper()
	o, err := New(testConfig(f, "bench"), Deps{})
	if err != nil {
		tb.Fatal(err)
	}
	caps := derate(o.cfg.Derate, o.in, o.shape.get())
	demand := priorDemand(f, routing.NewRows(f), caps, 0.6)
	first, err := o.solve(time.Unix(0, 0))
	if err != nil {
		tb.Fatal(err)
	}
	weights := map[string]map[string]float64{}
	for _, pl := range first.plans {
		weights[pl.row] = pl.weights
	}
	o.in.addFeatures(trafficRows(f, 1, demand, weights))
	r := Result{Version: 1, CreatedAt: time.Unix(0, 0)}
	o.commit(tb.Context(), first, first.snapshots(f), r)
	return o
}

// BenchmarkSolve is one solve as the loop runs it, without the publish:
// demand, derating, problem, solver (warm, with the churn term), checks
// and every cluster's table update. solve_ms is what
// ilb_optimizer_solve_duration_seconds measures.
func BenchmarkSolve(b *testing.B) {
	for _, c := range []struct {
		name string
		f    *schemas.Fleet
	}{
		{"example-3x6", schemas.ExampleFleetOneModel()},
		{"20x200", bigFleet(20, 200, 5)},
		{"50x1000", bigFleet(50, 1000, 8)},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := loadedOptimizer(b, c.f)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := o.solve(time.Unix(int64(i), 0)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "solve_ms")
		})
	}
}
