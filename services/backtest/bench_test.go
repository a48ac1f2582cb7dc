package backtest

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest/peer"
)

// BenchmarkBacktest simulates the acceptance scenario (the first 20
// minutes of the Mooncake conversation trace, 3,658 requests, over
// fleet-3region.yaml) under each policy, the peer routers included, on
// one goroutine, and reports
// simulated requests per second of wall time and of the benchmark
// thread's CPU time (one core), and simulated seconds per wall second. The x10 cases replay the same trace ten times
// faster over a fleet ten times larger (every engine repeated), so the
// controllers' cost per simulated second is spread over ten times the
// requests. README.md gives the figures and what limits them.
func BenchmarkBacktest(b *testing.B) {
	type bench struct {
		policy string
		scale  int
	}
	cases := []bench{
		{PolicyRoundRobin, 1}, {PolicyLeastLoaded, 1}, {PolicyHash, 1}, {PolicyPID, 1}, {PolicyOptimizer, 1},
		{PolicyHash, 10}, {PolicyOptimizer, 10},
	}
	for _, name := range peer.Names() { // the peer routers, one case each
		cases = append(cases, bench{name, 1})
	}
	for _, tc := range cases {
		b.Run(fmt.Sprintf("%s/x%d", tc.policy, tc.scale), func(b *testing.B) {
			bt := acceptanceBacktest(b, fleetShort, func(c *Config) {
				c.Parallel, c.Speed = 1, float64(tc.scale)
				c.Fleet = scaleFleet(c.Fleet, tc.scale)
			})
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuOK := threadCPUNs()
			var simS float64
			for range b.N {
				r, err := bt.RunPolicy(context.Background(), tc.policy)
				if err != nil {
					b.Fatal(err)
				}
				simS += r.SimulatedS
			}
			wall := b.Elapsed().Seconds()
			reqs := float64(bt.w.len() * b.N)
			b.ReportMetric(reqs/wall, "req/s")
			b.ReportMetric(simS/wall, "sim-s/s")
			if cpu1, ok := threadCPUNs(); ok && cpuOK && cpu1 > cpu0 {
				b.ReportMetric(reqs/(float64(cpu1-cpu0)/1e9), "req/cpu-s")
			}
		})
	}
}

// scaleFleet returns f with every engine repeated k times (names suffixed
// .1, .2, ...).
func scaleFleet(f *schemas.Fleet, k int) *schemas.Fleet {
	if k == 1 {
		return f
	}
	out := *f
	out.Engines = nil
	for _, e := range f.Engines {
		for i := range k {
			c := e
			c.Name = fmt.Sprintf("%s.%d", e.Name, i)
			out.Engines = append(out.Engines, c)
		}
	}
	return &out
}
