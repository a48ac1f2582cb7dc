package backtest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// regionAFleet keeps cluster fe-a and engines a0, a1 of twoRegionFleet.
func regionAFleet(t testing.TB) *schemas.Fleet {
	f := parseFleet(t, twoRegionFleet)
	f.Clusters, f.Engines = f.Clusters[:1], f.Engines[:2]
	return f
}

// steady is one new conversation every gap for d, from fe-a.
func steady(d, gap time.Duration, prompt, output int) *Trace {
	tr := &Trace{Format: FormatCSV}
	for i := range int(d / gap) {
		tr.Requests = append(tr.Requests, Request{ArrivalNs: int64(i) * int64(gap), Cluster: "fe-a",
			Conversation: fmt.Sprint(i), InputTokens: prompt, OutputTokens: output})
	}
	return tr
}

func TestFailure(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fail       Failure
		minA, maxA int // requests routed to a0
	}{
		// 600 requests, 10 per second, alternating; a0 is down 20-30 s: it
		// gets half of the 50 s it is up, plus the one request that finds
		// it rejecting before the routers know.
		{"recovers", Failure{Engine: "a0", At: 20 * time.Second, For: 10 * time.Second}, 250, 252},
		{"for good", Failure{Engine: "a0", At: 20 * time.Second}, 100, 102},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, regionAFleet(t), steady(time.Minute, 100*time.Millisecond, 500, 100), func(c *Config) {
				c.Policies, c.Failures = []string{PolicyRoundRobin}, []Failure{tc.fail}
			})
			p := res.Policies[0]
			a0 := p.Engines[0].Requests
			// Requests take about 2 s: some 10 are in flight on a0 when it fails.
			if p.Served+p.Failed != 600 || p.Failed < 5 || p.Failed > 15 || a0 < tc.minA || a0 > tc.maxA {
				t.Fatalf("served %d failed %d, a0 got %d requests (want %d-%d)", p.Served, p.Failed, a0, tc.minA, tc.maxA)
			}
		})
	}
}

func TestOptimizerAvoidsFailedEngine(t *testing.T) {
	// 4 requests a second: one engine alone can serve them (about 5.7).
	res := run(t, regionAFleet(t), steady(90*time.Second, 250*time.Millisecond, 500, 100), func(c *Config) {
		c.Policies, c.Failures = []string{PolicyOptimizer}, []Failure{{Engine: "a0", At: 30 * time.Second}}
	})
	p := res.Policies[0]
	s := p.Series
	for k, end := range s.TimeS {
		w := s.Weights[k][0]
		switch {
		case end <= 30 && !(w > 0.3):
			t.Errorf("%.0f s: a0's weight %.3f before the failure, want about half", end, w)
		case end >= 50 && w != 0:
			t.Errorf("%.0f s: a0's weight %.3f after its failure, want 0", end, w)
		}
	}
	if p.Shed != 0 || p.Failed > 10 || p.Served+p.Failed != p.Requests {
		t.Errorf("served %d shed %d failed %d", p.Served, p.Shed, p.Failed)
	}
}

func TestOptimizerShedsWhenOverloaded(t *testing.T) {
	// One engine, 20 requests a second of 2000 prompt tokens for three
	// minutes: the prefill alone needs four times the engine. Demand is
	// averaged over about 100 s (DemandAlpha 0.05 per 5 s window), so
	// shedding builds up over the first minutes.
	f := oneEngineFleet(t)
	res := run(t, f, steady(3*time.Minute, 50*time.Millisecond, 2000, 10), func(c *Config) {
		c.Policies = []string{PolicyOptimizer, PolicyHash}
	})
	opt, hash := res.Policies[0], res.Policies[1]
	if !(opt.Shed > 1000) || hash.Shed != 0 || !(opt.TTFTMs.P99 < 0.75*hash.TTFTMs.P99) {
		t.Fatalf("optimizer shed %d (TTFT p99 %.0f ms), hash shed %d (p99 %.0f ms)",
			opt.Shed, opt.TTFTMs.P99, hash.Shed, hash.TTFTMs.P99)
	}
}

func TestPIDLowersASlowEngine(t *testing.T) {
	f := regionAFleet(t)
	f.Engines[1].PrefillTokensPerS = 2000 // a1 prefills five times slower
	res := run(t, f, steady(2*time.Minute, 100*time.Millisecond, 1000, 20), func(c *Config) {
		c.Policies = []string{PolicyPID}
		c.PID.Kp, c.PID.Ki = 1, 0.1
	})
	s := res.Policies[0].Series
	first, last := s.Weights[0][1], s.Weights[len(s.Weights)-1][1]
	if !(last < first/2) || math.Abs(s.Weights[0][0]+first-1) > 1e-9 {
		t.Fatalf("a1's weight went from %.3f to %.3f, want below half", first, last)
	}
	p := res.Policies[0]
	if p.WeightUpdates == 0 || !(p.WeightChurn > 0) {
		t.Fatalf("no churn recorded: %+v", p)
	}
	// The weights moved per minute are the churn of the updates made
	// while requests arrived, per cluster (one here) and minute of the
	// trace's span: at most every update's.
	if len(p.Clusters) != 1 {
		t.Fatalf("%d clusters, want the one of regionAFleet", len(p.Clusters))
	}
	span := float64(p.Good) / p.GoodputRPS // the trace's span, as goodput_rps divides by it
	if all := p.WeightChurn * float64(p.WeightUpdates) / (span / 60); !(p.WeightMovedPerMinute > 0.9*all && p.WeightMovedPerMinute <= all*(1+1e-12)) {
		t.Errorf("weight moved per minute %v, want most of every update's %v", p.WeightMovedPerMinute, all)
	}
}
