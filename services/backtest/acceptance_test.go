package backtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// The acceptance scenario (issue #7): each 20-minute stretch of the
// Mooncake conversation trace over a three-region fleet with one region
// short of capacity. The figures are in README.md.

const (
	acceptanceTrace = "testdata/mooncake_conversation_20m.jsonl"
	fleetShort      = "testdata/fleet-3region.yaml"      // us-east: 1 h100 + 2 a100 for 45% of demand
	fleetShortH100  = "testdata/fleet-3region-h100.yaml" // us-east: 2 h100 for 45% of demand, all h100
)

// stretches are the trace's three 20-minute stretches (testdata/SOURCE.md).
var stretches = []struct{ name, trace string }{
	{"minutes 0-20", acceptanceTrace},
	{"minutes 20-40", "testdata/mooncake_conversation_20-40m.jsonl.gz"},
	{"minutes 40-60", "testdata/mooncake_conversation_40-60m.jsonl.gz"},
}

func acceptanceBacktest(t testing.TB, fleet string, mutate func(*Config)) *Backtest {
	t.Helper()
	return stretchBacktest(t, fleet, acceptanceTrace, mutate)
}

func stretchBacktest(t testing.TB, fleet, trace string, mutate func(*Config)) *Backtest {
	t.Helper()
	f, err := schemas.LoadFleet(fleet)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTraceFile(trace, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Fleet, cfg.Parallel = f, 2
	cfg.Policies = []string{PolicyRoundRobin, PolicyNearest, PolicyHash, PolicyPID, PolicyOptimizer}
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runAcceptance(t *testing.T, fleet, trace string, mutate func(*Config)) (*Result, map[string]*PolicyResult) {
	t.Helper()
	res, err := stretchBacktest(t, fleet, trace, mutate).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]*PolicyResult{}
	for i := range res.Policies {
		p := &res.Policies[i]
		by[p.Policy] = p
		t.Logf("%-12s TTFT p50 %6.0f p99 %7.0f ms  e2e p99 %7.0f ms  cache %.3f  churn %.4f  moved %.3f  shed %d  failed %d",
			p.Policy, p.TTFTMs.P50, p.TTFTMs.P99, p.E2EMs.P99, p.CacheHitRatio, p.WeightChurn, p.FollowupMovedRatio, p.Shed, p.Failed)
	}
	return res, by
}

// checkOptimizer asserts the acceptance targets, but only against the
// policies named in p99Over for the TTFT one.
func checkOptimizer(t *testing.T, by map[string]*PolicyResult, p99Over ...string) {
	t.Helper()
	opt := by[PolicyOptimizer]
	if opt.Served != opt.Requests {
		t.Errorf("optimizer served %d of %d (shed %d, failed %d): a tail hidden by refusals is no win",
			opt.Served, opt.Requests, opt.Shed, opt.Failed)
	}
	for _, name := range p99Over {
		if got, limit := opt.TTFTMs.P99, 0.9*by[name].TTFTMs.P99; !(got <= limit) {
			t.Errorf("optimizer TTFT p99 %.0f ms, want at most 0.9 × %s's %.0f ms = %.0f", got, name, by[name].TTFTMs.P99, limit)
		}
	}
	if got, limit := opt.CacheHitRatio, 0.8*by[PolicyHash].CacheHitRatio; !(got >= limit) {
		t.Errorf("optimizer cache hit ratio %.3f, want at least 0.8 × hash's %.3f", got, by[PolicyHash].CacheHitRatio)
	}
	if opt.WeightUpdates == 0 || !(opt.WeightChurn < by[PolicyPID].WeightChurn) {
		t.Errorf("optimizer weight churn %.4f over %d updates, want below pid's %.4f",
			opt.WeightChurn, opt.WeightUpdates, by[PolicyPID].WeightChurn)
	}
}

// TestAcceptance asserts the targets on every 20-minute stretch of the
// trace (about 1-2 s of CPU each on the development machine, more when
// it is shared), and that the first one gives the same numbers twice.
func TestAcceptance(t *testing.T) {
	if raceEnabled {
		t.Skip("the 20-minute acceptance replays take minutes under -race; TestAcceptanceRace covers races, run without -race for this")
	}
	var res *Result
	for i, st := range stretches {
		t.Run(st.name, func(t *testing.T) {
			r, by := runAcceptance(t, fleetShort, st.trace, nil)
			checkOptimizer(t, by, PolicyRoundRobin, PolicyNearest, PolicyPID)
			if i == 0 {
				res = r
			}
		})
	}
	if res == nil {
		t.FailNow()
	}

	// Same seed, same numbers: a second run, from a fresh read of the
	// trace and one policy at a time, gives byte-identical JSON.
	again, err := acceptanceBacktest(t, fleetShort, func(c *Config) { c.Parallel = 1 }).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(res)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Fatalf("two runs with seed %d differ:\n%s\n%s", res.Seed, a, b)
	}
}

// TestAcceptanceHomogeneous is the same scenario on an all-h100 fleet,
// where us-east is short by engine count only. There the optimizer does
// not beat round-robin's p99 TTFT by 10% on every stretch: it is 1-16%
// better over the three stretches with their arrivals shifted by 0-4 s,
// and has been up to 52% worse with earlier versions (README.md explains
// why). The test asserts what holds with
// margin on every stretch: the nearest, cache and churn targets, a p99 no
// worse than pid's, and within 25% of round-robin's.
func TestAcceptanceHomogeneous(t *testing.T) {
	if raceEnabled {
		t.Skip("run without -race (see TestAcceptance)")
	}
	for _, st := range stretches {
		t.Run(st.name, func(t *testing.T) {
			_, by := runAcceptance(t, fleetShortH100, st.trace, nil)
			checkOptimizer(t, by, PolicyNearest)
			opt := by[PolicyOptimizer].TTFTMs.P99
			if rr := by[PolicyRoundRobin].TTFTMs.P99; !(opt <= 1.25*rr) {
				t.Errorf("optimizer TTFT p99 %.0f ms, more than 1.25 × round-robin's %.0f ms", opt, rr)
			}
			if pid := by[PolicyPID].TTFTMs.P99; !(opt <= pid) {
				t.Errorf("optimizer TTFT p99 %.0f ms, more than pid's %.0f ms", opt, pid)
			}
		})
	}
}

// TestAcceptanceRace runs the scenario's first two minutes with the
// policies in parallel, twice, under the race detector too: the results
// must not depend on scheduling.
func TestAcceptanceRace(t *testing.T) {
	mutate := func(c *Config) {
		c.Duration = 2 * time.Minute
		c.Policies = []string{PolicyHash, PolicyPID, PolicyOptimizer}
	}
	res1, err := acceptanceBacktest(t, fleetShort, mutate).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res2, err := acceptanceBacktest(t, fleetShort, func(c *Config) { mutate(c); c.Parallel = 1 }).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(res1)
	b, _ := json.Marshal(res2)
	if string(a) != string(b) {
		t.Fatalf("parallel and serial runs differ:\n%s\n%s", a, b)
	}
	if res1.Trace.Requests < 200 || res1.Policies[2].Served == 0 {
		t.Fatalf("implausible slice: %+v", res1.Trace)
	}
}
