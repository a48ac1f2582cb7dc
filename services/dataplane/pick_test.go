package dataplane

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

var threeWeights = map[string]float64{"eng-a": 0.5, "eng-b": 0.3, "eng-c": 0.2}

func TestNoSnapshotIsAnErrorNotNil(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	if _, err := tryPick(d, "fe-a", "k"); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("pick before any snapshot: %v, want ErrNoSnapshot", err)
	}
	rec := postJSON(d.Handler(), "/v1/pick", `{"cluster":"fe-a","conversation_id":"k"}`)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "no snapshot yet") {
		t.Fatalf("/v1/pick before any snapshot: %d %s", rec.Code, rec.Body)
	}
}

func TestPicksFollowWeights(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, d, snap("fe-a", 1, threeWeights))
	got := shares(picksOf(t, d, "fe-a", 20000))
	for name, w := range threeWeights {
		// 20,000 keys: the binomial stdev of a share is at most 0.0036.
		if math.Abs(got[name]-w) > 0.015 {
			t.Errorf("%s got %.4f of the keys, weight %.2f", name, got[name], w)
		}
	}
}

// TestReplicasAgree: data planes given the same snapshots pick alike for
// every key, a restarted one too, whether the snapshot carries a table or
// the table is built from the weights.
func TestReplicasAgree(t *testing.T) {
	v1 := map[string]float64{"eng-a": 0.4, "eng-b": 0.35, "eng-c": 0.25}
	v2 := map[string]float64{"eng-a": 0.2, "eng-b": 0.45, "eng-c": 0.25, "eng-d": 0.1}
	t1, err := sched.Build([]string{"eng-a", "eng-b", "eng-c"}, []float64{0.4, 0.35, 0.25}, sched.DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := t1.Update([]string{"eng-a", "eng-b", "eng-c", "eng-d"}, []float64{0.2, 0.45, 0.25, 0.1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	t.Run("table-less", func(t *testing.T) {
		a, b := newDP(t, testConfig("fe-a"), Deps{}), newDP(t, testConfig("fe-a"), Deps{})
		mustSet(t, a, snap("fe-a", 1, v1))
		mustSet(t, b, snap("fe-a", 1, v1))
		want := picksOf(t, a, "fe-a", n)
		assertSame(t, want, picksOf(t, b, "fe-a", n))
		restarted := newDP(t, testConfig("fe-a"), Deps{})
		mustSet(t, restarted, snap("fe-a", 1, v1))
		assertSame(t, want, picksOf(t, restarted, "fe-a", n))
	})
	t.Run("with table", func(t *testing.T) {
		long := newDP(t, testConfig("fe-a"), Deps{})
		mustSet(t, long, withTable(snap("fe-a", 1, v1), t1))
		mustSet(t, long, withTable(snap("fe-a", 2, v2), t2))
		restarted := newDP(t, testConfig("fe-a"), Deps{})
		mustSet(t, restarted, withTable(snap("fe-a", 2, v2), t2))
		assertSame(t, picksOf(t, long, "fe-a", n), picksOf(t, restarted, "fe-a", n))
	})
}

func assertSame(t *testing.T, want, got []string) {
	t.Helper()
	diff := 0
	for i := range want {
		if want[i] != got[i] {
			diff++
		}
	}
	if diff > 0 {
		t.Fatalf("%d of %d keys picked differently", diff, len(want))
	}
}

// TestWeightShiftMovesMinimumShare: a table-less update moves the total
// variation distance of the keys, no more.
func TestWeightShiftMovesMinimumShare(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	v1 := map[string]float64{"eng-a": 0.5, "eng-b": 0.5}
	v2 := map[string]float64{"eng-a": 0.3, "eng-b": 0.5, "eng-c": 0.2}
	mustSet(t, d, snap("fe-a", 1, v1))
	before := picksOf(t, d, "fe-a", 20000)
	mustSet(t, d, snap("fe-a", 2, v2))
	after := picksOf(t, d, "fe-a", 20000)
	moved := 0
	for i := range before {
		if before[i] != after[i] {
			moved++
			if before[i] != "eng-a" || after[i] != "eng-c" {
				t.Fatalf("key %d moved %s -> %s; only eng-a's surplus should move, to eng-c", i, before[i], after[i])
			}
		}
	}
	tv := sched.TotalVariation(v1, v2)
	if share := float64(moved) / 20000; math.Abs(share-tv) > 0.015 {
		t.Fatalf("moved %.4f of the keys, total variation distance %.2f", share, tv)
	}
}

// TestUnhealthyEngineSkippedDeterministically: replicas that see the same
// status send an unhealthy engine's keys to the same next choices; other
// keys do not move; recovery brings the keys back.
func TestUnhealthyEngineSkippedDeterministically(t *testing.T) {
	a, b := newDP(t, testConfig("fe-a"), Deps{}), newDP(t, testConfig("fe-a"), Deps{})
	for _, d := range []*DataPlane{a, b} {
		mustSet(t, d, snap("fe-a", 1, threeWeights))
	}
	before := picksOf(t, a, "fe-a", 5000)
	for _, tc := range []struct {
		name string
		st   schemas.EngineStatus
	}{
		{"unhealthy", schemas.EngineStatus{Engine: "eng-b", TimeUnixNano: 1, Health: schemas.HealthUnhealthy, ReadyReplicas: 2}},
		{"no ready replica", schemas.EngineStatus{Engine: "eng-b", TimeUnixNano: 2, Health: schemas.HealthHealthy, ReadyReplicas: 0, TotalReplicas: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.ObserveStatus(tc.st)
			b.ObserveStatus(tc.st)
			got := picksOf(t, a, "fe-a", 5000)
			assertSame(t, got, picksOf(t, b, "fe-a", 5000))
			for i := range got {
				switch {
				case got[i] == "eng-b":
					t.Fatalf("key %d still picks the unavailable engine", i)
				case before[i] != "eng-b" && got[i] != before[i]:
					t.Fatalf("key %d of a healthy engine moved %s -> %s", i, before[i], got[i])
				}
			}
		})
	}
	healthy := schemas.EngineStatus{Engine: "eng-b", TimeUnixNano: 3, Health: schemas.HealthHealthy, ReadyReplicas: 2}
	a.ObserveStatus(healthy)
	assertSame(t, before, picksOf(t, a, "fe-a", 5000))
	// An older status arriving late changes nothing.
	a.ObserveStatus(schemas.EngineStatus{Engine: "eng-b", TimeUnixNano: 1, Health: schemas.HealthUnhealthy, ReadyReplicas: 2})
	assertSame(t, before, picksOf(t, a, "fe-a", 5000))
}

func TestAllEnginesDownIsNoEngine(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	d.ObserveStatus(schemas.EngineStatus{Engine: "eng-a", TimeUnixNano: 1, Health: schemas.HealthUnhealthy})
	if _, err := tryPick(d, "fe-a", "k"); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("pick with every engine down: %v, want ErrNoEngine", err)
	}
}

// TestBoundedLoadSpill: a new conversation whose engine holds more than
// (1+ε)·share of the in-flight requests goes to its next choice, the
// same next choice that skipping the engine would give; an ongoing
// conversation stays; the spilled conversation sticks to where it went.
func TestBoundedLoadSpill(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{}) // SpillFactor 1.25
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5}))
	c, _ := d.cluster("fe-a")
	ongoing := keysOn(t, d, "fe-a", "eng-a", 1)[0]
	pickName(t, d, "fe-a", ongoing)
	fresh := keysOn(t, d, "fe-a", "eng-a", 50)[1:]
	cellA := c.cells["eng-a"]
	// 10 in flight, all on eng-a: bound ⌈1.25 × 0.5 × 11⌉ = 7 ≤ 10.
	cellA.inflight.Store(10)
	c.inflight.Store(10)
	for _, k := range fresh {
		if got := pickName(t, d, "fe-a", k); got != "eng-b" {
			t.Fatalf("new conversation %s stayed on the overloaded engine (%s)", k, got)
		}
	}
	if got := pickName(t, d, "fe-a", ongoing); got != "eng-a" {
		t.Fatalf("ongoing conversation moved to %s under load", got)
	}
	// Load gone: a spilled conversation stays where it went (its KV cache
	// is there); a brand-new key of eng-a goes to eng-a again.
	cellA.inflight.Store(0)
	c.inflight.Store(0)
	if got := pickName(t, d, "fe-a", fresh[0]); got != "eng-b" {
		t.Fatalf("spilled conversation went back to %s", got)
	}
	if got := pickName(t, d, "fe-a", keysOn(t, d, "fe-a", "eng-a", 60)[59]); got != "eng-a" {
		t.Fatalf("new conversation without load went to %s", got)
	}
	if n := c.fallbacks[reasonSpill].Load(); n != int64(len(fresh)) {
		t.Fatalf("spill fallbacks counted %d, want %d", n, len(fresh))
	}
}

// TestSpillBound checks the bound's arithmetic at its edge.
func TestSpillBound(t *testing.T) {
	c := &cell{}
	p := &picker{spill: 1.25}
	s := &slot{cell: c, share: 0.5}
	for _, tc := range []struct {
		inflight, total int64
		over            bool
	}{
		{0, 0, false},  // ⌈0.625⌉ = 1
		{1, 1, false},  // ⌈1.25⌉ = 2
		{2, 2, true},   // ⌈1.875⌉ = 2
		{5, 10, false}, // ⌈6.875⌉ = 7
		{7, 10, true},
	} {
		c.inflight.Store(tc.inflight)
		if got := p.over(s, tc.total); got != tc.over {
			t.Errorf("inflight %d of %d: over = %v, want %v", tc.inflight, tc.total, got, tc.over)
		}
	}
	p.spill = math.Inf(1)
	c.inflight.Store(1000)
	if p.over(s, 1000) {
		t.Error("spill factor +Inf still spills")
	}
}

func TestShedNewConversationsFirst(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5}))
	c, _ := d.cluster("fe-a")
	const n = 4000
	picksOf(t, d, "fe-a", n) // these conversations are now ongoing
	mustSet(t, d, &schemas.Snapshot{Version: 2, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 0.3,
		Weights: map[string]float64{"eng-a": 0.35, "eng-b": 0.35}})
	// With new conversations at half the traffic, they are shed at
	// 0.3/0.5 = 60% and ongoing ones not at all.
	c.newShare.Store(math.Float64bits(0.5))
	for i := range n {
		if _, err := tryPick(d, "fe-a", "conv-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("ongoing conversation %d: %v", i, err)
		}
	}
	shed := 0
	for i := range n {
		if _, err := tryPick(d, "fe-a", "new-"+strconv.Itoa(i)); errors.Is(err, ErrShed) {
			shed++
		}
	}
	if got := float64(shed) / n; math.Abs(got-0.6) > 0.03 {
		t.Fatalf("shed %.3f of new conversations, want 0.6", got)
	}
	// New conversations at 10%: all new ones are shed, and ongoing ones
	// at (0.3 − 0.1)/0.9 = 22%.
	c.newShare.Store(math.Float64bits(0.1))
	shedOld := 0
	for i := range n {
		if _, err := tryPick(d, "fe-a", "conv-"+strconv.Itoa(i)); errors.Is(err, ErrShed) {
			shedOld++
		}
	}
	if got := float64(shedOld) / n; math.Abs(got-0.2/0.9) > 0.03 {
		t.Fatalf("shed %.3f of ongoing conversations, want %.3f", got, 0.2/0.9)
	}
	if _, err := tryPick(d, "fe-a", "brand-new"); !errors.Is(err, ErrShed) {
		t.Fatalf("new conversation passed while ongoing ones are shed: %v", err)
	}
	info := decodeJSON[routingInfo](t, getPath(d.Handler(), "/v1/routing?cluster=fe-a"))
	if want := int64(shed + shedOld + 1); info.ShedTotal != want || info.RefusedTotal != 0 {
		t.Errorf("/v1/routing shed_total %d, refused_total %d; want %d and 0", info.ShedTotal, info.RefusedTotal, want)
	}
}

// TestShedHTTP: shed requests get 429 with Retry-After while ongoing
// conversations pass.
func TestShedHTTP(t *testing.T) {
	a := newEngine(t, "eng-a")
	cfg := testConfig("fe-a")
	cfg.EngineURLs = engineURLs(a)
	deps, tel := withTelemetry(t)
	d := newDP(t, cfg, deps)
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	h := d.Handler()
	if rec := chat(t, h, "ongoing-user", nil); rec.Code != 200 {
		t.Fatalf("first turn: %d %s", rec.Code, rec.Body)
	}
	mustSet(t, d, &schemas.Snapshot{Version: 2, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 1,
		Weights: map[string]float64{"eng-a": 0}})
	rec := chat(t, h, "new-user", nil)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("shed request: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	mustSet(t, d, &schemas.Snapshot{Version: 3, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 0.5,
		Weights: map[string]float64{"eng-a": 0.5}})
	c, _ := d.cluster("fe-a")
	c.newShare.Store(math.Float64bits(0.6)) // new traffic covers the shed fraction
	if rec := chat(t, h, "ongoing-user", nil); rec.Code != 200 {
		t.Fatalf("ongoing conversation under shedding: %d %s", rec.Code, rec.Body)
	}
	if got := metricValue(t, tel.MetricsHandler(), metricShed, map[string]string{"cluster": "fe-a"}); got != 1 {
		t.Fatalf("%s = %v, want 1", metricShed, got)
	}
}

// A solver's round-off shed fraction (below routing.MinShed) refuses
// nothing, even when no new conversation was seen lately.
func TestRoundOffShedIsNoShed(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, d, &schemas.Snapshot{Version: 1, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 1e-12,
		Weights: map[string]float64{"eng-a": 0.5, "eng-b": 0.5 - 1e-12}})
	c, _ := d.cluster("fe-a")
	c.newShare.Store(math.Float64bits(0))
	for i := range 200 {
		if _, err := tryPick(d, "fe-a", "new-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("new conversation %d under a round-off shed: %v", i, err)
		}
	}
	mustSet(t, d, &schemas.Snapshot{Version: 2, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 0.01,
		Weights: map[string]float64{"eng-a": 0.495, "eng-b": 0.495}})
	if _, err := tryPick(d, "fe-a", "brand-new"); !errors.Is(err, ErrShed) {
		t.Fatalf("a real shed fraction with no new conversation lately: %v, want the new one shed", err)
	}
}
