package optimize

import (
	"fmt"
	"testing"
)

// classesFleet is benchFleet's random fleet with request classes: models
// models, each engine serving one or two of them, and context limits of
// 8192 tokens, 32768 tokens or none, so each model has three prompt
// bands (short, long, longest) and every cluster a demand row per model
// and band (half, a third and a sixth of its model's demand). The load is
// benchFleet's; the longest band fits only engines without a limit.
func classesFleet(b testing.TB, clusters, engines, models int) *Problem {
	q, err := classesProblem(b, clusters, engines, models).Expand()
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// classesProblem is classesFleet before Expand.
func classesProblem(b testing.TB, clusters, engines, models int) *Problem {
	p := benchFleet(b, clusters, engines)
	rng := newRand(uint64(clusters*31 + engines*7 + models))
	limits := []int{8192, 32768, 0}
	for i := range p.Engines {
		e := &p.Engines[i]
		first := rng.IntN(models)
		e.Models = []string{modelName(first)}
		if rng.Float64() < 0.5 {
			e.Models = append(e.Models, modelName((first+1+rng.IntN(models-1))%models))
		}
		e.MaxContextTokens = limits[i%len(limits)]
	}
	bands := [][3]float64{{0, 8192, 0.5}, {8192, 32768, 1.0 / 3}, {32768, 0, 1.0 / 6}}
	for i := range p.Clusters {
		c := &p.Clusters[i]
		for m := range models {
			for _, band := range bands {
				p.Demands = append(p.Demands, Demand{Cluster: c.Name, Model: modelName(m),
					MinPromptTokens: int(band[0]), MaxPromptTokens: int(band[1]), DemandRps: c.DemandRps / float64(models) * band[2]})
			}
		}
		c.DemandRps = 0
	}
	return p
}

func modelName(i int) string { return fmt.Sprintf("model-%d", i) }

// BenchmarkSolveClasses solves the classes fleet, 4 models x 3 prompt
// bands over 100 clusters and 1000 engines (1,200 demand rows), cold, and
// warm after a 5% demand change; "expand" times Expand alone.
func BenchmarkSolveClasses(b *testing.B) {
	b.Run("expand", func(b *testing.B) {
		p := classesProblem(b, 100, 1000, 4)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Expand(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold/100x1000x4x3", func(b *testing.B) {
		p := classesFleet(b, 100, 1000, 4)
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
	b.Run("warm/100x1000x4x3", func(b *testing.B) {
		p := classesFleet(b, 100, 1000, 4)
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

// TestClassesFleet: the benchmark's fleet is what it says, and every row
// may use only engines serving its class.
func TestClassesFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1,200-row problem")
	}
	p := classesFleet(t, 100, 1000, 4)
	if len(p.Clusters) != 1200 || len(p.Engines) != 1000 {
		t.Fatalf("%d rows, %d engines", len(p.Clusters), len(p.Engines))
	}
	for _, c := range p.Clusters {
		if len(p.Eligible[c.Name]) == 0 {
			t.Errorf("row %s may use no engine", c.Name)
		}
	}
}
