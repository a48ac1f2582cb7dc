package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// Shared fixtures for the tests and benchmarks. Randomness is seeded so
// every run sees the same inputs.

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x1b)) }

func engineNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("eng-%04d", i)
	}
	return names
}

// randomWeights draws weights spread over about two orders of magnitude.
func randomWeights(r *rand.Rand, n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Exp(r.NormFloat64())
	}
	return w
}

// perturb returns the weights of the next solve: a share frac of the
// engines (at least one) get base·exp(sigma·N(0,1)), the rest keep their
// current weight. Drawing around a fixed base keeps the weights stationary
// over many updates, as capacity-driven weights are.
func perturb(r *rand.Rand, base, cur []float64, frac, sigma float64) []float64 {
	out := append([]float64(nil), cur...)
	changed := 0
	for i := range out {
		if r.Float64() < frac {
			out[i] = base[i] * math.Exp(sigma*r.NormFloat64())
			changed++
		}
	}
	if changed == 0 {
		i := r.IntN(len(out))
		out[i] = base[i] * math.Exp(sigma*r.NormFloat64())
	}
	return out
}

// normalised returns w as a name -> share map summing to 1.
func normalised(names []string, w []float64) map[string]float64 {
	total := 0.0
	for _, x := range w {
		total += x
	}
	m := make(map[string]float64, len(w))
	for i, x := range w {
		m[names[i]] = x / total
	}
	return m
}

// slotShares returns a table's slot shares by engine name.
func slotShares(t *Table) map[string]float64 {
	m := make(map[string]float64, t.Len())
	for i, w := range t.Weights() {
		m[t.Engine(i)] = w
	}
	return m
}

func convKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("conv-%06d", i)
	}
	return keys
}

// runs counts the runs of a table's slot array.
func runs(t *Table) int {
	n := 0
	for s := range t.slots {
		if s == 0 || t.slots[s] != t.slots[s-1] {
			n++
		}
	}
	return n
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
