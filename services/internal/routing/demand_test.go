package routing

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

func newTestDemand(t *testing.T, alpha float64) (*schemas.Fleet, *Demand) {
	t.Helper()
	f := schemas.ExampleFleetOneModel()
	d, err := NewDemand(f, DemandConfig{Alpha: alpha, MaxShedCorrection: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	return f, d
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

// Completions only (no engine status): each window is an observation, the
// first replaces nothing, the shed fraction in force scales it up (capped),
// and a window that is not newer changes nothing.
func TestDemandFromCompletions(t *testing.T) {
	_, d := newTestDemand(t, 0.5)
	if d.Known() {
		t.Fatal("known before any window")
	}
	if !d.Observe(end(1), []schemas.Feature{pair(1, "fe-east", "east-h100-0", 3), pair(1, "fe-east", "east-a100-0", 1)}, nil) {
		t.Fatal("first window not folded in")
	}
	if got := d.RPS(0); got != 4 {
		t.Fatalf("first window: %v rps, want 4", got)
	}
	// fe-east shed 20%: 4 rps served is 5 demanded.
	d.Observe(end(2), []schemas.Feature{pair(2, "fe-east", "east-h100-0", 4)}, []float64{0.2, 0, 0})
	if got := d.RPS(0); !near(got, 0.5*5+0.5*4) || !near(d.Observed(0), 5) {
		t.Fatalf("second window: %v rps (observed %v), want the average of 5 and 4", got, d.Observed(0))
	}
	if d.Observe(end(2), []schemas.Feature{pair(2, "fe-east", "east-h100-0", 40)}, nil) {
		t.Fatal("a window folded in twice")
	}
	// Everything shed: the correction is capped at 1/(1 − 0.9).
	d.Observe(end(3), []schemas.Feature{pair(3, "fe-east", "east-h100-0", 1)}, []float64{1, 0, 0})
	if got := d.Observed(0); !near(got, 10) {
		t.Fatalf("all shed: observed %v, want 10", got)
	}
}

// A slow average starts as the plain mean of the first observations, so
// the first window does not weigh on it for minutes.
func TestDemandWarmUpMean(t *testing.T) {
	_, d := newTestDemand(t, 0.05)
	for k, rps := range []float64{1, 2, 6} {
		d.Observe(end(k), []schemas.Feature{pair(k, "fe-west", "west-a100-0", rps)}, nil)
	}
	if got := d.RPS(1); !near(got, 3) {
		t.Fatalf("after 1, 2, 6 rps: %v, want their mean 3", got)
	}
	for k := 3; k < 40; k++ {
		d.Observe(end(k), []schemas.Feature{pair(k, "fe-west", "west-a100-0", 3)}, nil)
	}
	d.Observe(end(40), []schemas.Feature{pair(40, "fe-west", "west-a100-0", 23)}, nil)
	if got := d.RPS(1); !near(got, 3+0.05*20) {
		t.Fatalf("after 40 windows, a jump of 20 rps moves the estimate to %v, want 3 + α·20", got)
	}
}

// The first window with engine status only primes the in-flight readings;
// from the next one on, requests queueing on an engine count as demand:
// shared as the window's completions on it, else as the latest earlier
// completions, else by demand share among the clusters that may use it.
func TestDemandCountsQueueGrowth(t *testing.T) {
	_, d := newTestDemand(t, 1)
	if d.Observe(end(0), []schemas.Feature{statusRow(0, "east-h100-0", 0), pair(0, "fe-east", "east-h100-0", 1)}, nil) {
		t.Fatal("the priming window was folded in")
	}
	// 10 more requests in flight 5 s later: 2 rps arrived beyond the
	// completions; fe-east and fe-west completed 3:1 there.
	d.Observe(end(1), []schemas.Feature{statusRow(1, "east-h100-0", 10),
		pair(1, "fe-east", "east-h100-0", 3), pair(1, "fe-west", "east-h100-0", 1)}, nil)
	if e, w := d.RPS(0), d.RPS(1); !near(e, 3+1.5) || !near(w, 1+0.5) {
		t.Fatalf("growth shared by completions: fe-east %v fe-west %v, want 4.5 and 1.5", e, w)
	}
	// No completion on it in this window: the latest ones share it.
	d.Observe(end(2), []schemas.Feature{statusRow(2, "east-h100-0", 20)}, nil)
	if e, w := d.RPS(0), d.RPS(1); !near(e, 1.5) || !near(w, 0.5) {
		t.Fatalf("growth shared by earlier completions: fe-east %v fe-west %v, want 1.5 and 0.5", e, w)
	}
	// An engine that never completed anything: demand shares of the
	// clusters that may use it (fe-eu may not use east engines).
	d.Observe(end(3), []schemas.Feature{statusRow(3, "east-h100-0", 20), statusRow(3, "east-h100-1", 0)}, nil)
	d.Observe(end(4), []schemas.Feature{statusRow(4, "east-h100-0", 20), statusRow(4, "east-h100-1", 15)}, nil)
	if e, w, eu := d.RPS(0), d.RPS(1), d.RPS(2); !near(e, 3*0.45/0.75) || !near(w, 3*0.30/0.75) || eu != 0 {
		t.Fatalf("growth shared by demand shares: %v %v %v, want 1.8, 1.2, 0", e, w, eu)
	}
	// Queues draining below the completions never make demand negative.
	d.Observe(end(5), []schemas.Feature{statusRow(5, "east-h100-0", 0), pair(5, "fe-east", "east-h100-0", 1)}, nil)
	if got := d.RPS(0); got != 0 {
		t.Fatalf("draining queue: %v rps, want 0", got)
	}
}

// Rows in any order, and rows the fleet does not know, give bit-identical
// estimates.
func TestDemandRowOrder(t *testing.T) {
	f, a := newTestDemand(t, 0.3)
	_, b := newTestDemand(t, 0.3)
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range 20 {
		var rows []schemas.Feature
		for _, e := range f.Engines {
			rows = append(rows, statusRow(k, e.Name, rng.Float64()*30))
			for _, c := range f.Clusters {
				if rng.IntN(3) > 0 {
					rows = append(rows, pair(k, c.Name, e.Name, rng.Float64()*2))
				}
			}
		}
		shuffled := append([]schemas.Feature{pair(k, "no-such-cluster", "east-h100-0", 5), statusRow(k, "no-such-engine", 9)}, rows...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		a.Observe(end(k), rows, []float64{0.1, 0, 0})
		b.Observe(end(k), shuffled, []float64{0.1, 0, 0})
	}
	for c := range f.Clusters {
		if a.RPS(c) != b.RPS(c) || a.RPS(c) == 0 {
			t.Errorf("cluster %d: %v in fleet order, %v shuffled", c, a.RPS(c), b.RPS(c))
		}
	}
}

func TestDemandConfig(t *testing.T) {
	for _, c := range []DemandConfig{{Alpha: 0, MaxShedCorrection: 0.5}, {Alpha: 1.5}, {Alpha: 0.5, MaxShedCorrection: 1}, {Alpha: math.NaN()}} {
		if _, err := NewDemand(schemas.ExampleFleetOneModel(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := NewDemand(nil, DemandConfig{Alpha: 0.5}); err == nil {
		t.Error("no fleet accepted")
	}
}

func TestPriorDemand(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	caps := []float64{4, 4, 2, 2, 4, 2}
	got := PriorDemand(f, NewRows(f), caps, 0.5)
	if !near(got[0], f.TotalDemandRPS*0.45) || !near(got[2], f.TotalDemandRPS*0.25) {
		t.Fatalf("prior %v, want total_demand_rps %v split by shares", got, f.TotalDemandRPS)
	}
	f.TotalDemandRPS = 0
	got = PriorDemand(f, NewRows(f), caps, 0.5)
	if want := 0.5 * 18 * f.MaxUtilization * 0.30; !near(got[1], want) {
		t.Fatalf("prior without total_demand_rps: %v, want %v for fe-west", got, want)
	}
}

func TestPublishedShed(t *testing.T) {
	if PublishedShed(0.3, false) != 0 || PublishedShed(0.3, true) != 0.3 {
		t.Error("a shed before any observation must not be published; one after must be")
	}
}
