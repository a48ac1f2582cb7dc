package optimize

import (
	"math"
	"runtime"
	"testing"
)

// checkFeasible asserts that sol obeys every constraint of p and that its
// objective is what its weights cost, up to a relative tolerance.
func checkFeasible(t testing.TB, p *Problem, sol *Solution, tol float64) {
	t.Helper()
	load := map[string]float64{}
	total, cost := 0.0, 0.0
	for _, cl := range p.Clusters {
		shed := sol.ShedFraction[cl.Name]
		if !(shed >= -tol && shed <= 1+tol) {
			t.Errorf("cluster %s: shed fraction %v", cl.Name, shed)
		}
		sum := shed
		elig, restricted := p.Eligible[cl.Name]
		for e, w := range sol.Weights[cl.Name] {
			n, ok := p.NetworkMs[cl.Name][e]
			if !ok || (restricted && !contains(elig, e)) {
				t.Errorf("cluster %s sends %v to %s, which it may not use", cl.Name, w, e)
			}
			if !(w > 0) {
				t.Errorf("cluster %s: weight %v on %s", cl.Name, w, e)
			}
			sum += w
			load[e] += w * cl.DemandRps
			cost += w * cl.DemandRps * n
		}
		if math.Abs(sum-1) > tol {
			t.Errorf("cluster %s: weights and shed sum to %v", cl.Name, sum)
		}
		total += cl.DemandRps
		penalty := p.ShedPenaltyMs
		if penalty == 0 {
			penalty = sol.ShedPenaltyMs
		}
		cost += shed * cl.DemandRps * penalty
	}
	for _, e := range p.Engines {
		l := sol.EngineLoadRps[e.Name]
		if math.Abs(l-load[e.Name]) > tol*max(1, l) {
			t.Errorf("engine %s: load %v, weights give %v", e.Name, l, load[e.Name])
		}
		if l > e.CapacityRps*p.MaxUtilization*(1+tol) {
			t.Errorf("engine %s: load %v above cap %v", e.Name, l, e.CapacityRps*p.MaxUtilization)
		}
		f := newEngineCost(e, p.MeanOutputTokens, p.MaxUtilization)
		cost += f.cost(load[e.Name])
	}
	if total > 0 {
		if got := cost / total; math.Abs(got-sol.ObjectiveMs) > tol*max(1, got) {
			t.Errorf("objective %v, weights cost %v", sol.ObjectiveMs, got)
		}
	}
	if sol.LowerBoundMs > sol.ObjectiveMs+sol.ChurnCostMs+tol*max(1, sol.ObjectiveMs) {
		t.Errorf("lower bound %v above the objective %v", sol.LowerBoundMs, sol.ObjectiveMs)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// cpuClock reports a benchmark's CPU time per operation next to its wall
// time, which on a shared machine says more. start locks the goroutine to
// its thread; stop reports cpu-ns/op and unlocks it.
type cpuClock struct{ t0 int64 }

func startCPU(b *testing.B) *cpuClock {
	runtime.LockOSThread()
	t0, _ := threadCPUNs()
	return &cpuClock{t0}
}

// stop reports cpu-ns/op and returns it (0 where the clock is missing).
func (c *cpuClock) stop(b *testing.B) float64 {
	defer runtime.UnlockOSThread()
	t1, ok := threadCPUNs()
	if !ok || b.N == 0 {
		return 0
	}
	ns := float64(t1-c.t0) / float64(b.N)
	b.ReportMetric(ns, "cpu-ns/op")
	return ns
}
