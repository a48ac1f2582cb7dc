package routing

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/ilb-router/ilb/solver/optimize"
)

func all(string) bool { return true }

// TestSmoothMovesAtItsPace: after one time constant each part has moved
// 1 − 1/e of the way, the weights keep summing to 1 − shed, and the
// served split and the shed fraction move at their own paces.
func TestSmoothMovesAtItsPace(t *testing.T) {
	cfg := SmoothConfig{Weights: 100 * time.Second, Shed: 50 * time.Second}
	prev := map[string]float64{"a": 0.8}           // shed 0.2, all served on a
	next := map[string]float64{"a": 0.3, "b": 0.3} // shed 0.4, half on b
	w, shed := Smooth(cfg, prev, 0.2, next, 0.4, all, 50*time.Second, 0)
	aw, as := 1-math.Exp(-0.5), 1-math.Exp(-1)
	if want := 0.2 + as*0.2; math.Abs(shed-want) > 1e-12 {
		t.Errorf("shed %v after one shed time constant, want %v", shed, want)
	}
	// Of the served traffic, b's share moved aw of the way from 0 to 1/2.
	if got, want := w["b"]/(1-shed), aw*0.5; math.Abs(got-want) > 1e-12 {
		t.Errorf("b serves %v of the served traffic, want %v", got, want)
	}
	if sum := w["a"] + w["b"]; math.Abs(sum-(1-shed)) > 1e-12 {
		t.Errorf("weights sum to %v, want 1 − shed = %v", sum, 1-shed)
	}
	// A longer wait moves further; a very long one lands on the solution.
	_, shed2 := Smooth(cfg, prev, 0.2, next, 0.4, all, 100*time.Second, 0)
	if !(shed2 > shed && shed2 < 0.4) {
		t.Errorf("shed %v after twice as long, want between %v and 0.4", shed2, shed)
	}
	w3, shed3 := Smooth(cfg, prev, 0.2, next, 0.4, all, time.Hour, 0)
	if math.Abs(shed3-0.4) > 1e-9 || math.Abs(w3["b"]-0.3) > 1e-9 {
		t.Errorf("after an hour: %v shed %v, want the solution %v shed 0.4", w3, shed3, next)
	}
}

// TestSmoothShedsAllAtItsPace: a solution that sheds a whole row moves
// the published shed fraction toward 1 at the Shed pace, serving the
// rest as the published split (its usable engines); with a Shed pace of
// 0, or nothing usable left, it is published as it is.
func TestSmoothShedsAllAtItsPace(t *testing.T) {
	cfg := DefaultSmoothConfig()
	prev := map[string]float64{"a": 0.6, "b": 0.3} // shed 0.1
	for _, next := range []map[string]float64{{}, nil} {
		w, shed := Smooth(cfg, prev, 0.1, next, 1, all, 5*time.Second, 0)
		as := 1 - math.Exp(-5.0/100)
		if want := 0.1 + as*0.9; math.Abs(shed-want) > 1e-12 {
			t.Fatalf("shed %v after 5 s toward shedding all, want %v (the Shed pace), not 1", shed, want)
		}
		if math.Abs(w["a"]-2*w["b"]) > 1e-12 || math.Abs(w["a"]+w["b"]-(1-shed)) > 1e-12 || len(w) != 2 {
			t.Fatalf("weights %v: want the published split 2:1 summing to 1 − shed = %v", w, 1-shed)
		}
	}
	onlyB := func(e string) bool { return e == "b" }
	if w, shed := Smooth(cfg, prev, 0.1, map[string]float64{}, 1, onlyB, 5*time.Second, 0); len(w) != 1 || math.Abs(w["b"]-(1-shed)) > 1e-12 {
		t.Fatalf("a unusable: %v shed %v, want all served on b", w, shed)
	}
	none := func(string) bool { return false }
	if w, shed := Smooth(cfg, prev, 0.1, map[string]float64{}, 1, none, 5*time.Second, 0); len(w) != 0 || shed != 1 {
		t.Fatalf("nothing usable: %v shed %v, want the solution (nothing served, shed 1)", w, shed)
	}
	if w, shed := Smooth(SmoothConfig{}, prev, 0.1, map[string]float64{}, 1, all, 5*time.Second, 0); len(w) != 0 || shed != 1 {
		t.Fatalf("Shed pace 0: %v shed %v, want the solution", w, shed)
	}
}

// TestSmoothLeavesRoomAlone: a row that sheds nothing before or after
// publishes the solution as it is (the same map) when its calm time
// constants are 0 (SmoothConfig.CalmAsSolved, what a caller whose
// smoothed routing overloads an engine publishes), whatever the reuse; so
// do zero time constants, a missing published routing, and a published
// routing that sheds everything.
func TestSmoothLeavesRoomAlone(t *testing.T) {
	cfg := DefaultSmoothConfig()
	calm := cfg.CalmAsSolved()
	prev := map[string]float64{"a": 0.5, "b": 0.5}
	next := map[string]float64{"a": 0.9, "b": 0.1}
	for _, c := range []struct {
		name             string
		cfg              SmoothConfig
		prev             map[string]float64
		prevShed, nxShed float64
		next             map[string]float64
	}{
		{"no shedding", calm, prev, 0, 0, next},
		{"shed under MinShed", calm, prev, MinShed / 2, MinShed / 3, next},
		{"zero time constants", SmoothConfig{}, prev, 0.3, 0.1, map[string]float64{"a": 0.9}},
		{"nothing published", cfg, nil, 0, 0.2, map[string]float64{"a": 0.8}},
		{"published sheds all", cfg, map[string]float64{}, 1, 0.2, map[string]float64{"a": 0.8}},
	} {
		for _, reuse := range []float64{0, 0.3} {
			w, shed := Smooth(c.cfg, c.prev, c.prevShed, c.next, c.nxShed, all, 5*time.Second, reuse)
			if shed != c.nxShed || len(w) != len(c.next) {
				t.Errorf("%s, reuse %v: got %v shed %v, want the solution %v shed %v", c.name, reuse, w, shed, c.next, c.nxShed)
			}
			for e, v := range c.next {
				if w[e] != v {
					t.Errorf("%s, reuse %v: %s weight %v, want the solution's %v bit for bit", c.name, reuse, e, w[e], v)
				}
			}
		}
	}
}

// TestSmoothFollowsReuse: a row that sheds nothing moves its split at the
// pace of SmoothConfig.Reuse when the fleet serves ReuseFull or more of
// its prompt tokens from prefix caches, faster in proportion below, and
// never faster than SmoothConfig.Calm, its pace without reuse; it never
// sheds, and its weights sum to 1.
func TestSmoothFollowsReuse(t *testing.T) {
	cfg := DefaultSmoothConfig()
	prev := map[string]float64{"a": 0.5, "b": 0.5}
	next := map[string]float64{"a": 0.9, "b": 0.1}
	moved := func(reuse float64) float64 {
		w, shed := Smooth(cfg, prev, 0, next, 0, all, 10*time.Second, reuse)
		if shed != 0 || math.Abs(w["a"]+w["b"]-1) > 1e-12 {
			t.Fatalf("reuse %v: weights %v shed %v, want no shed and weights summing to 1", reuse, w, shed)
		}
		return (w["a"] - 0.5) / 0.4 // share of the way to the solution
	}
	if got, want := moved(ReuseFull), 1-math.Exp(-10/cfg.Reuse.Seconds()); math.Abs(got-want) > 1e-12 {
		t.Errorf("at full reuse moved %v of the way in 10 s, want %v", got, want)
	}
	if moved(0.5) != moved(ReuseFull) {
		t.Errorf("reuse above ReuseFull must not slow the split further")
	}
	if got, want := moved(ReuseFull/2), 1-math.Exp(-10/(cfg.Reuse.Seconds()/2)); math.Abs(got-want) > 1e-12 {
		t.Errorf("at half of ReuseFull moved %v of the way, want %v (half the time constant)", got, want)
	}
	calm := 1 - math.Exp(-10/cfg.Calm.Seconds())
	if got := moved(0); math.Abs(got-calm) > 1e-12 {
		t.Errorf("without reuse moved %v of the way in 10 s, want %v (SmoothConfig.Calm)", got, calm)
	}
	if got := moved(ReuseFull / 20); math.Abs(got-calm) > 1e-12 {
		t.Errorf("at a twentieth of ReuseFull moved %v of the way in 10 s, want %v (never faster than Calm)", got, calm)
	}
	if cfg.Calm <= 0 || cfg.Calm >= cfg.Reuse {
		t.Fatalf("default Calm %v must lie between 0 and Reuse %v", cfg.Calm, cfg.Reuse)
	}
	// Engines the row may no longer use lose their weight at once.
	w, _ := Smooth(cfg, map[string]float64{"a": 0.5, "dead": 0.5}, 0, next, 0, func(e string) bool { return e != "dead" }, 10*time.Second, 0.3)
	if _, ok := w["dead"]; ok || math.Abs(w["a"]+w["b"]-1) > 1e-12 {
		t.Errorf("weights %v keep an unusable engine or do not sum to 1", w)
	}
	// Reuse and Calm off: as solved; CalmAsSolved turns off those two only.
	w, _ = Smooth(SmoothConfig{Weights: cfg.Weights, Shed: cfg.Shed}, prev, 0, next, 0, all, 10*time.Second, 0.3)
	if w["a"] != 0.9 || w["b"] != 0.1 {
		t.Errorf("with Reuse and Calm 0 the split %v must be the solution's", w)
	}
	if got := cfg.CalmAsSolved(); got != (SmoothConfig{Weights: cfg.Weights, Shed: cfg.Shed}) {
		t.Errorf("CalmAsSolved of %+v is %+v, want only Reuse and Calm zeroed", cfg, got)
	}
}

// TestSmoothReleased: once an overload has ended (SmoothConfig.Released)
// a row that shed publishes its solution as it is, refusals gone, and so
// does a row without prefix reuse; a row with reuse keeps the Reuse pace.
func TestSmoothReleased(t *testing.T) {
	cfg := DefaultSmoothConfig()
	rel := cfg.Released()
	if rel != (SmoothConfig{Reuse: cfg.Reuse}) {
		t.Fatalf("Released of %+v is %+v, want only Reuse kept", cfg, rel)
	}
	prev := map[string]float64{"a": 0.5, "b": 0.5}
	next := map[string]float64{"a": 0.9, "b": 0.1}
	// A row that shed: the solution at once, whatever the reuse.
	w, shed := Smooth(rel, map[string]float64{"a": 0.4, "b": 0.4}, 0.2, next, 0, all, 10*time.Second, 0.3)
	if shed != 0 || w["a"] != 0.9 || w["b"] != 0.1 {
		t.Errorf("a row that shed: %v shed %v, want the solution and no shed", w, shed)
	}
	// A calm row without reuse: the solution at once.
	if w, _ := Smooth(rel, prev, 0, next, 0, all, 10*time.Second, 0); w["a"] != 0.9 || w["b"] != 0.1 {
		t.Errorf("a calm row without reuse: %v, want the solution", w)
	}
	// A calm row with reuse: the Reuse pace, as before the overload.
	for _, reuse := range []float64{ReuseFull / 2, ReuseFull} {
		got, _ := Smooth(rel, prev, 0, next, 0, all, 10*time.Second, reuse)
		want, _ := Smooth(cfg, prev, 0, next, 0, all, 10*time.Second, reuse)
		if got["a"] != want["a"] || got["b"] != want["b"] || !(got["a"] < 0.9) {
			t.Errorf("a calm row with reuse %v: %v, want %v (its Reuse pace)", reuse, got, want)
		}
	}
	// Released and overloading: CalmAsSolved turns that off too.
	if got := rel.CalmAsSolved(); got != (SmoothConfig{}) {
		t.Errorf("Released().CalmAsSolved() is %+v, want every pace 0", got)
	}
}

// TestSmoothDropsUnusable: an engine the row may no longer use (gone from
// the problem, no longer eligible, no capacity) loses its weight at once;
// with nothing usable left the solution is published as it is.
func TestSmoothDropsUnusable(t *testing.T) {
	cfg := DefaultSmoothConfig()
	prev := map[string]float64{"a": 0.45, "dead": 0.45}
	next := map[string]float64{"a": 0.5, "b": 0.3}
	usable := func(e string) bool { return e != "dead" }
	w, shed := Smooth(cfg, prev, 0.1, next, 0.2, usable, 5*time.Second, 0)
	if _, ok := w["dead"]; ok {
		t.Errorf("weights %v keep the unusable engine", w)
	}
	if !(shed > 0.1 && shed < 0.2) || math.Abs(w["a"]+w["b"]-(1-shed)) > 1e-12 {
		t.Errorf("weights %v shed %v, want shed between 0.1 and 0.2 and weights summing to 1 − shed", w, shed)
	}
	// a keeps most of the served traffic (it had all of the usable part).
	if !(w["a"] > w["b"]) {
		t.Errorf("weights %v: a should keep most of its traffic", w)
	}
	w, shed = Smooth(cfg, map[string]float64{"dead": 0.9}, 0.1, next, 0.2, usable, 5*time.Second, 0)
	if shed != 0.2 || w["a"] != 0.5 || w["b"] != 0.3 {
		t.Errorf("nothing usable published: got %v shed %v, want the solution", w, shed)
	}
}

// TestSmoothStopsUnderTheFloor: while the solver sheds nothing, the shed
// fraction decays, and stops at once below SmoothShedFloor (it would
// refuse a request now and then for minutes); while the solver sheds, a
// small fraction is kept.
func TestSmoothStopsUnderTheFloor(t *testing.T) {
	cfg := DefaultSmoothConfig()
	w := map[string]float64{"a": 0.9}
	shed := 0.1
	solution := map[string]float64{"a": 0.7, "b": 0.3}
	steps := 0
	for shed > 0 {
		w, shed = Smooth(cfg, w, shed, solution, 0, all, 5*time.Second, 0)
		steps++
		if steps > 1000 {
			t.Fatal("the shed fraction never stopped")
		}
	}
	// 0.1 decays to the floor in τ·ln(0.1/floor) = 100 s · 3.5.
	want := int(math.Ceil(cfg.Shed.Seconds() * math.Log(0.1/SmoothShedFloor) / 5))
	if steps < want-1 || steps > want+1 {
		t.Errorf("stopped shedding after %d steps of 5 s, want about %d", steps, want)
	}
	// Once nothing is shed, the solution is published as it is.
	if w["a"] != 0.7 || w["b"] != 0.3 {
		t.Errorf("after the shedding stopped, weights %v, want the solution's", w)
	}
	if _, got := Smooth(cfg, w, SmoothShedFloor/2, solution, 0.05, all, 5*time.Second, 0); !(got > SmoothShedFloor/2) {
		t.Errorf("shed %v while the solver sheds 0.05: a small fraction must be kept and grow", got)
	}
}

// TestSmoothIsDeterministic: the result does not depend on map order (the
// sums run in name order), bit for bit.
func TestSmoothIsDeterministic(t *testing.T) {
	prev, next := map[string]float64{}, map[string]float64{}
	for i := range 64 {
		prev["e"+strconv.Itoa(i)] = 0.8 / 64
		next["e"+strconv.Itoa((i*7)%64)] = float64(i+1) / 2080 * 0.7
	}
	w0, s0 := Smooth(DefaultSmoothConfig(), prev, 0.2, next, 0.3, all, 5*time.Second, 0)
	for range 50 {
		w, s := Smooth(DefaultSmoothConfig(), prev, 0.2, next, 0.3, all, 5*time.Second, 0)
		if s != s0 || len(w) != len(w0) {
			t.Fatalf("two calls differ: shed %v and %v", s0, s)
		}
		for e, v := range w0 {
			if w[e] != v {
				t.Fatalf("two calls differ at %s: %v and %v", e, v, w[e])
			}
		}
	}
}

// TestSmoothConfigValidate rejects negative time constants.
func TestSmoothConfigValidate(t *testing.T) {
	if err := DefaultSmoothConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (SmoothConfig{}).Validate(); err != nil {
		t.Fatalf("zero (off): %v", err)
	}
	for _, c := range []SmoothConfig{{Weights: -time.Second}, {Shed: -time.Second}, {Reuse: -time.Second}, {Calm: -time.Second}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestUsable: eligible engines with capacity only.
func TestUsable(t *testing.T) {
	p := &optimize.Problem{
		Engines:  []optimize.Engine{{Name: "a", CapacityRps: 1}, {Name: "b", CapacityRps: 0}, {Name: "c", CapacityRps: 2}},
		Eligible: map[string][]string{"row": {"a", "b"}},
	}
	u := Usable(p, "row")
	for e, want := range map[string]bool{"a": true, "b": false, "c": false, "zz": false} {
		if u(e) != want {
			t.Errorf("usable(%s) = %v, want %v", e, u(e), want)
		}
	}
}

// TestRelease: smoothing is released once the solver sheds nothing and
// the fleet's demand has fallen ReleaseDrop below what it was at the last
// shortfall, stays released until the solver sheds again, and is not
// released by the solver merely stopping to shed at a steady demand.
func TestRelease(t *testing.T) {
	var r Release
	for i, step := range []struct {
		demand float64
		sheds  bool
		want   bool
	}{
		{5, false, false},  // nothing shed yet
		{10, true, false},  // a shortfall at demand 10
		{10, false, false}, // the solver stops shedding, demand steady: the edge of capacity
		{9, false, false},  // 10% down
		{10.5, true, false},
		{8.5, false, false}, // 19% below 10.5
		{8.3, false, true},  // 21% below: the overload has ended
		{9.5, false, true},  // stays released
		{9.5, true, false},  // a new shortfall
	} {
		if got := r.Observe(step.demand, step.sheds); got != step.want {
			t.Fatalf("step %d (demand %v, sheds %v): released %v, want %v", i, step.demand, step.sheds, got, step.want)
		}
	}
}

// TestShedsAndTotalDemand: the helpers Release is fed with.
func TestShedsAndTotalDemand(t *testing.T) {
	p := &optimize.Problem{Clusters: []optimize.Cluster{{Name: "a", DemandRps: 1.5}, {Name: "b", DemandRps: 2}}}
	if got := TotalDemand(p); got != 3.5 {
		t.Errorf("TotalDemand = %v, want 3.5", got)
	}
	if Sheds(&optimize.Solution{ShedFraction: map[string]float64{"a": 0, "b": MinShed / 2}}) {
		t.Error("a fraction under MinShed counts as shedding")
	}
	if !Sheds(&optimize.Solution{ShedFraction: map[string]float64{"a": 0, "b": 0.01}}) {
		t.Error("a shed of 0.01 does not count")
	}
}

// TestOverloads: a routing that loads an engine past its cap (max
// utilisation × capacity, or MaxLoadRps) overloads; one within it, or
// within a thousandth over it, does not.
func TestOverloads(t *testing.T) {
	p := &optimize.Problem{MaxUtilization: 0.8,
		Clusters: []optimize.Cluster{{Name: "a", DemandRps: 10}, {Name: "b", DemandRps: 4}},
		Engines:  []optimize.Engine{{Name: "x", CapacityRps: 10}, {Name: "y", CapacityRps: 10, MaxLoadRps: 5}}}
	for _, c := range []struct {
		name string
		w    map[string]map[string]float64
		want bool
	}{
		{"within the caps", map[string]map[string]float64{"a": {"x": 0.6, "y": 0.4}, "b": {"x": 0.5}}, false}, // x 8, y 4
		{"x past max utilisation", map[string]map[string]float64{"a": {"x": 0.7, "y": 0.3}, "b": {"x": 0.5}}, true},
		{"y past its SLO cap", map[string]map[string]float64{"a": {"x": 0.4, "y": 0.6}}, true},
		{"a thousandth over is rounding", map[string]map[string]float64{"a": {"x": 0.8008}}, false},
		{"shed rows send less", map[string]map[string]float64{"a": {"x": 0.5, "y": 0.2}, "b": {"y": 0.5}}, false},
	} {
		if got := Overloads(p, c.w); got != c.want {
			t.Errorf("%s: Overloads %v, want %v", c.name, got, c.want)
		}
	}
}
