package routing

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
)

func TestQueueLimit(t *testing.T) {
	for _, tc := range []struct{ cap, slo, want float64 }{
		{2, 5000, 10}, // 2 rps for 5 s
		{0.1, 2000, 1},
		{0, 2000, 0},
		{math.NaN(), 2000, 0},
		{3, 0, 0},
		{math.Inf(1), 1000, 0},
	} {
		if got := QueueLimit(tc.cap, tc.slo); got != tc.want {
			t.Errorf("QueueLimit(%v, %v) = %v, want %v", tc.cap, tc.slo, got, tc.want)
		}
	}
	p := &optimize.Problem{Engines: []optimize.Engine{{Name: "a", CapacityRps: 4}, {Name: "b", CapacityRps: 0.5}}}
	if got := QueueLimits(p, 3000); got["a"] != 12 || got["b"] != 1.5 || len(got) != 2 {
		t.Errorf("QueueLimits = %v", got)
	}
}

func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		waiting, limit float64
		ongoing, want  bool
	}{
		{9, 10, false, true},
		{10, 10, false, false}, // a new conversation is refused at the limit
		{10, 10, true, true},   // an ongoing one gets twice as far
		{19, 10, true, true},
		{20, 10, true, false},
		{1e9, 0, false, true}, // no limit known
	} {
		if got := Admit(tc.waiting, tc.limit, tc.ongoing); got != tc.want {
			t.Errorf("Admit(%v, %v, %v) = %v, want %v", tc.waiting, tc.limit, tc.ongoing, got, tc.want)
		}
	}
}

func TestCapFit(t *testing.T) {
	prior := optimize.Engine{CapacityRps: 4, TTFT: optimize.TTFT{BaseMs: 90, QueueMs: 40}}
	fit := optimize.Engine{CapacityRps: 9, TTFT: optimize.TTFT{BaseMs: 100, QueueMs: 50}}
	if got := CapFit(fit, prior, 2); got.CapacityRps != 4.4 || got.TTFT != fit.TTFT {
		t.Errorf("CapFit over the prior: %+v", got)
	}
	// Below the prior, with queueing seen: at 2 rps of 3, the queue term
	// is 50 × 2 = 100 ms, the base's 100%.
	fit.CapacityRps = 3
	if got := CapFit(fit, prior, 2); !reflect.DeepEqual(got, fit) {
		t.Errorf("CapFit below the prior with queueing seen changed it: %+v", got)
	}
	// Below the prior, the windows flat: at 1.5 rps of 3 the queue term
	// is 2 ms, 2% of the base. The prior's capacity and queue term, the
	// fit's base, and the TBOT slope per rps kept (6 ms at 3 rps = 8 ms at 4).
	flat := optimize.Engine{CapacityRps: 3, TTFT: optimize.TTFT{BaseMs: 100, QueueMs: 2}, TBOT: optimize.TBOT{BaseMs: 20, SlopeMs: 6}}
	got := CapFit(flat, prior, 1.5)
	want := optimize.Engine{CapacityRps: 4, TTFT: optimize.TTFT{BaseMs: 100, QueueMs: 40}, TBOT: optimize.TBOT{BaseMs: 20, SlopeMs: 8}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CapFit of a flat fit below the prior = %+v, want %+v", got, want)
	}
	// Just at MinQueueSeen it is believed.
	flat.TTFT.QueueMs = MinQueueSeen * 100 // ρ/(1−ρ) = 1 at 1.5 of 3
	if got := CapFit(flat, prior, 1.5); !reflect.DeepEqual(got, flat) {
		t.Errorf("CapFit at MinQueueSeen changed it: %+v", got)
	}
	// No load seen: nothing to believe a lower capacity on.
	if got := CapFit(flat, prior, 0); got.CapacityRps != 4 {
		t.Errorf("CapFit with no load seen kept %v", got.CapacityRps)
	}
	// A fit without capacity is left to the solver's validation.
	if got := CapFit(optimize.Engine{TBOT: optimize.TBOT{SlopeMs: 6}}, prior, 0); got.CapacityRps != 0 || got.TBOT.SlopeMs != 6 {
		t.Errorf("CapFit of a fit without capacity: %+v", got)
	}
	if got := CapFit(optimize.Engine{CapacityRps: 9}, optimize.Engine{}, 1); got.CapacityRps != 9 {
		t.Errorf("CapFit without a prior: %+v", got)
	}
}

func TestSecondChoice(t *testing.T) {
	tab, err := sched.Rebalance(nil, []string{"a", "b", "c"}, []float64{1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	open := func(int) bool { return false }
	loads := []float64{5, 1, 1}
	load := func(i int) float64 { return loads[i] }
	moved, kept, onA := 0, 0, 0
	for k := range 3000 {
		h := sched.HashKey(fmt.Sprint("conv-", k))
		own := tab.PickHash(h)
		if own == 0 {
			onA++
		}
		got := SecondChoice(tab, h, own, open, load)
		switch {
		case own == 0 && got != 0:
			moved++ // the loaded engine gives up keys whose second candidate is lighter
		case own != 0 && got == 0:
			t.Fatalf("key %d moved onto the loaded engine", k)
		case own != 0 && got != own:
			t.Fatalf("key %d moved between equal loads", k)
		default:
			kept++
		}
	}
	// A key of a leaves unless all Choices−1 other candidates land on a.
	want := float64(onA) * (1 - math.Pow(1.0/3, Choices-1))
	if math.Abs(float64(moved)-want) > 4*math.Sqrt(want) {
		t.Errorf("moved %d keys off the loaded engine, want about %.0f", moved, want)
	}
	// A closed second candidate is never taken.
	closedAll := func(i int) bool { return i != 0 }
	for k := range 100 {
		h := sched.HashKey(fmt.Sprint("x-", k))
		if got := SecondChoice(tab, h, 0, closedAll, load); got != 0 {
			t.Fatalf("went to closed engine %d", got)
		}
	}
}

func TestMove(t *testing.T) {
	tab, err := sched.Rebalance(nil, []string{"a", "b"}, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	open := func(int) bool { return false }
	var h uint64
	for k := 0; ; k++ { // a key of a whose candidates include b
		h = sched.HashKey(fmt.Sprint("k", k))
		if tab.PickHash(h) == 0 && SecondChoice(tab, h, 0, open, func(i int) float64 { return float64(1 - i) }) == 1 {
			break
		}
	}
	for _, tc := range []struct {
		a, b float64
		want int
	}{
		{10, 4.9, 1}, // under half: leaves its cache
		{10, 5, 0},   // not under half: stays
		{10, 9, 0},
		{0, 0, 0},
		{MoveLoadMin, 0, 1},                    // its engine at the floor: leaves for an idle one
		{math.Nextafter(MoveLoadMin, 0), 0, 0}, // under the floor: its engine serves it in time
		{math.Inf(1), 1, 1},                    // its engine's load unknown: may leave
	} {
		loads := []float64{tc.a, tc.b}
		if got := Move(tab, h, 0, MoveMin, open, func(i int) float64 { return loads[i] }); got != tc.want {
			t.Errorf("Move at loads %v, %v = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Move(tab, h, 0, MoveMin-1, open, func(i int) float64 { return loads[i] }); got != 0 {
			t.Errorf("Move at loads %v, %v with nothing held at its engine = %d, want its own engine", tc.a, tc.b, got)
		}
	}
}

// TestPrefillLimit: prefill rate × replicas × the SLO in tokens; 0 (no
// limit) without a positive rate or SLO; PrefillLimits covers the fleet.
func TestPrefillLimit(t *testing.T) {
	for _, tc := range []struct {
		tps      float64
		replicas int
		slo      float64
		want     float64
	}{
		{9282, 1, 10000, 92820}, // an h100 prefills 92,820 tokens in 10 s
		{3086, 0, 2000, 6172},   // replicas 0 reads as 1
		{3000, 2, 2000, 12000},
		{0, 1, 2000, 0},
		{math.NaN(), 1, 2000, 0},
		{3000, 1, 0, 0},
		{math.Inf(1), 1, 1000, 0},
	} {
		if got := PrefillLimit(tc.tps, tc.replicas, tc.slo); got != tc.want {
			t.Errorf("PrefillLimit(%v, %d, %v) = %v, want %v", tc.tps, tc.replicas, tc.slo, got, tc.want)
		}
	}
	f := schemas.ExampleFleet()
	f.TTFTSLOMs = 2000
	got := PrefillLimits(f)
	if len(got) != len(f.Engines) {
		t.Fatalf("PrefillLimits = %v, want one per engine of %d", got, len(f.Engines))
	}
	for _, e := range f.Engines {
		if want := e.PrefillTokensPerS * float64(max(e.Replicas, 1)) * 2; math.Abs(got[e.Name]-want) > 1e-9 {
			t.Errorf("%s: %v, want %v", e.Name, got[e.Name], want)
		}
	}
}

// TestOverflow: an engine outside the table takes a new conversation only
// when its table engine carries at least MoveLoadMin, and only if it is
// under MoveRatio × that load; the lightest such engine wins (the first
// on ties), closed ones never; an unknown load (+Inf) keeps the plan.
func TestOverflow(t *testing.T) {
	loads := []float64{0.3, 0.1, 0.1, 0}
	open := func(int) bool { return false }
	load := func(i int) float64 { return loads[i] }
	for _, tc := range []struct {
		name   string
		best   float64
		closed func(int) bool
		want   int
	}{
		{"table engine light", MoveLoadMin * 0.99, open, -1},
		{"table engine at the floor", MoveLoadMin, open, 3},
		{"lightest wins", 1, open, 3},
		{"first of equals", 1, func(i int) bool { return i == 3 }, 1},
		{"none under half", 0.15, open, -1},
		{"all closed", 1, func(int) bool { return true }, -1},
		{"unknown load keeps the plan", math.Inf(1), open, -1},
		{"NaN load", math.NaN(), open, -1},
	} {
		if got := Overflow(tc.best, len(loads), tc.closed, load); got != tc.want {
			t.Errorf("%s: Overflow(%v) = %d, want %d", tc.name, tc.best, got, tc.want)
		}
	}
	if got := Overflow(1, 0, open, load); got != -1 {
		t.Errorf("no engine outside the table: %d, want -1", got)
	}
}

// TestBusy: the other data planes' requests by the last status (never
// below 0) plus this data plane's own now.
func TestBusy(t *testing.T) {
	for _, c := range []struct{ waiting, running, ownAt, own, want float64 }{
		{0, 0, 0, 0, 0},
		{2, 3, 0, 0, 5}, // others only
		{2, 3, 5, 5, 5}, // all its own, counted once
		{2, 3, 5, 0, 0}, // all its own, all ended since
		{2, 3, 1, 4, 8}, // 4 of others, 4 of its own now
		{0, 1, 3, 2, 2}, // the status missed two of its own in flight: never below its own
	} {
		if got := Busy(c.waiting, c.running, c.ownAt, c.own); got != c.want {
			t.Errorf("Busy(%v, %v, %v, %v) = %v, want %v", c.waiting, c.running, c.ownAt, c.own, got, c.want)
		}
	}
}
