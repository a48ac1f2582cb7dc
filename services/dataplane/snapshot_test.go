package dataplane

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

func snapJSON(t testing.TB, s *schemas.Snapshot) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRejectedSnapshotLeavesRoutingUntouched feeds bad snapshots after a
// good one: each is rejected with its reason, counted, and every pick,
// the version and /v1/routing stay as they were.
func TestRejectedSnapshotLeavesRoutingUntouched(t *testing.T) {
	deps, tel := withTelemetry(t)
	d := newDP(t, testConfig("fe-a"), deps)
	good := snap("fe-a", 5, threeWeights)
	mustSet(t, d, good)
	want := picksOf(t, d, "fe-a", 3000)
	wrongTable, err := sched.Build([]string{"eng-a", "eng-b", "eng-c"}, []float64{0.1, 0.1, 0.8}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	badData := withTable(snap("fe-a", 6, threeWeights), wrongTable)
	badData.Table.Data = []byte{0xff}
	cases := []struct {
		name, reason string
		data         []byte
	}{
		{"not JSON", RejectMalformed, []byte(`{"version": 6, "cluster": "fe-a", "weights": {`)},
		{"an array", RejectMalformed, []byte(`[1,2]`)},
		{"weights not summing to 1", RejectInvalid, snapJSON(t, snap("fe-a", 6, map[string]float64{"eng-a": 0.5, "eng-b": 0.2}))},
		{"negative weight", RejectInvalid, snapJSON(t, snap("fe-a", 6, map[string]float64{"eng-a": 1.5, "eng-b": -0.5}))},
		{"version 0", RejectInvalid, snapJSON(t, snap("fe-a", 0, threeWeights))},
		{"older version", RejectOld, snapJSON(t, snap("fe-a", 4, map[string]float64{"eng-a": 1}))},
		{"same version, new content", RejectNotBumped, snapJSON(t, snap("fe-a", 5, map[string]float64{"eng-a": 1}))},
		{"another cluster", RejectCluster, snapJSON(t, snap("fe-z", 6, threeWeights))},
		{"table disagreeing with weights", RejectTable, snapJSON(t, withTable(snap("fe-a", 6, threeWeights), wrongTable))},
		{"table that does not decode", RejectInvalid, snapJSON(t, badData)}, // schemas checks the encoding
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := d.SetSnapshotJSON(tc.data)
			var re *RejectError
			if !errors.As(err, &re) || re.Reason != tc.reason {
				t.Fatalf("SetSnapshotJSON = %v, want a rejection for %s", err, tc.reason)
			}
			label := "fe-a"
			if tc.reason == RejectCluster || tc.reason == RejectMalformed {
				label = rejectedNoLabel
			}
			if got := metricValue(t, tel.MetricsHandler(), metricRejected, map[string]string{"cluster": label, "reason": tc.reason}); got < 1 {
				t.Fatalf("%s{reason=%s} = %v, want >= 1", metricRejected, tc.reason, got)
			}
			c, _ := d.cluster("fe-a")
			if v := c.cur.Load().version; v != 5 {
				t.Fatalf("version %d after a rejected snapshot, want 5", v)
			}
			assertSame(t, want, picksOf(t, d, "fe-a", 3000))
		})
	}
	// Re-delivering the snapshot in use (a KV re-watch) is not a rejection.
	if err := d.SetSnapshotJSON(snapJSON(t, good)); err != nil {
		t.Fatalf("re-delivery of the snapshot in use: %v", err)
	}
	if got := metricValue(t, tel.MetricsHandler(), metricRejected, nil); got != float64(len(cases)) {
		t.Fatalf("rejections counted %v, want %d", got, len(cases))
	}
}

func TestOnlyNewerVersionsApply(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, d, snap("fe-a", 3, map[string]float64{"eng-a": 1}))
	mustSet(t, d, snap("fe-a", 9, map[string]float64{"eng-b": 1}))
	if err := d.SetSnapshot(snap("fe-a", 7, map[string]float64{"eng-a": 1})); err == nil {
		t.Fatal("older snapshot applied")
	}
	if got := pickName(t, d, "fe-a", "k"); got != "eng-b" {
		t.Fatalf("picks %s, want eng-b of version 9", got)
	}
}

func TestTableCarriedSnapshotMatchesBuilt(t *testing.T) {
	tb, err := sched.Build([]string{"eng-a", "eng-b", "eng-c"}, []float64{0.5, 0.3, 0.2}, sched.DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	withT := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, withT, withTable(snap("fe-a", 1, threeWeights), tb))
	built := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, built, snap("fe-a", 1, threeWeights))
	assertSame(t, picksOf(t, withT, "fe-a", 5000), picksOf(t, built, "fe-a", 5000))
}

// TestStalePolicy: past StaleAfter the age is exported, the snapshot
// reported stale, shedding stops and requests are still served, counted
// as stale fallbacks; a fresh snapshot ends it.
func TestStalePolicy(t *testing.T) {
	clk := newClock(t0)
	deps, tel := withTelemetry(t)
	deps.Now = clk.Now
	cfg := testConfig("fe-a")
	cfg.StaleAfter = time.Minute
	d := newDP(t, cfg, deps)
	mustSet(t, d, &schemas.Snapshot{Version: 1, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 1,
		Weights: map[string]float64{"eng-a": 0}})
	if _, err := tryPick(d, "fe-a", "k"); !errors.Is(err, ErrShed) {
		t.Fatalf("fresh snapshot shedding everything: %v", err)
	}
	mustSet(t, d, &schemas.Snapshot{Version: 2, Cluster: "fe-a", CreatedAt: t0, ShedFraction: 0.5,
		Weights: map[string]float64{"eng-a": 0.25, "eng-b": 0.25}})
	clk.Advance(90 * time.Second)
	d.tick()
	h := d.Handler()
	info := decodeJSON[routingInfo](t, getPath(h, "/v1/routing?cluster=fe-a"))
	if !info.Stale || info.AgeSeconds != 90 {
		t.Fatalf("routing after 90 s: stale=%v age=%v, want stale at 90 s", info.Stale, info.AgeSeconds)
	}
	if got := metricValue(t, tel.MetricsHandler(), metricAge, map[string]string{"cluster": "fe-a"}); got != 90 {
		t.Fatalf("%s = %v, want 90", metricAge, got)
	}
	for i := range 200 {
		if _, err := tryPick(d, "fe-a", "stale-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("stale snapshot failed a request: %v", err)
		}
	}
	if got := metricValue(t, tel.MetricsHandler(), metricFallbacks, map[string]string{"cluster": "fe-a", "reason": "stale"}); got != 200 {
		t.Fatalf("stale fallbacks %v, want 200", got)
	}
	clk.Advance(time.Second)
	mustSet(t, d, &schemas.Snapshot{Version: 3, Cluster: "fe-a", CreatedAt: clk.Now(), Weights: map[string]float64{"eng-a": 1}})
	if info := decodeJSON[routingInfo](t, getPath(h, "/v1/routing?cluster=fe-a")); info.Stale || info.Version != 3 {
		t.Fatalf("after a fresh snapshot: stale=%v version=%d", info.Stale, info.Version)
	}
}

// TestStaleSpillUsesEqualShares: under the stale policy the bounded-load
// spill balances on equal shares, not on the old weights.
func TestStaleSpillUsesEqualShares(t *testing.T) {
	clk := newClock(t0)
	cfg := testConfig("fe-a")
	cfg.StaleAfter = time.Minute
	d := newDP(t, cfg, Deps{Now: clk.Now})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.9, "eng-b": 0.1}))
	c, _ := d.cluster("fe-a")
	if s := c.cur.Load().slots[0].share; s < 0.89 || s > 0.91 {
		t.Fatalf("fresh share of eng-a %v, want 0.9", s)
	}
	clk.Advance(2 * time.Minute)
	d.tick()
	for _, s := range c.cur.Load().slots {
		if s.share != 0.5 {
			t.Fatalf("stale share of %s = %v, want 0.5", s.eng.name, s.share)
		}
	}
}

func TestFuzzSeedsDoNotPanic(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	for _, in := range snapshotSeeds(t) {
		_ = d.SetSnapshotJSON(in)
	}
}

func snapshotSeeds(t testing.TB) [][]byte {
	tb, _ := sched.Build([]string{"eng-a", "eng-b"}, []float64{0.5, 0.5}, 64)
	return [][]byte{
		snapJSON(t, snap("fe-a", 1, threeWeights)),
		snapJSON(t, withTable(snap("fe-a", 2, map[string]float64{"eng-a": 0.5, "eng-b": 0.5}), tb)),
		[]byte(`{"version":3,"cluster":"fe-a","weights":{},"shed_fraction":1}`),
		[]byte(`{"version":4,"cluster":"fe-a","weights":{"x":1},"table":{"slots":4,"encoding":"rle-uvarint-v1","engines":["x"],"data":"AAQ="}}`),
		[]byte(`null`), []byte(`{}`), []byte(strings.Repeat("[", 100)),
	}
}

// FuzzSetSnapshotJSON: any bytes either apply a newer valid snapshot that
// then routes every key, or are rejected leaving the version unchanged.
func FuzzSetSnapshotJSON(f *testing.F) {
	for _, s := range snapshotSeeds(f) {
		f.Add(s)
	}
	d := newDP(f, testConfig("fe-a"), Deps{})
	c, _ := d.cluster("fe-a")
	f.Fuzz(func(t *testing.T, data []byte) {
		before := c.cur.Load().version
		err := d.SetSnapshotJSON(data)
		after := c.cur.Load()
		switch {
		case err != nil && after.version != before:
			t.Fatalf("rejected (%v) but version moved %d -> %d", err, before, after.version)
		case err == nil && after.version < before:
			t.Fatalf("accepted an older version %d < %d", after.version, before)
		}
		if _, err := tryPick(d, "fe-a", "k"); err != nil && !errors.Is(err, ErrShed) &&
			!errors.Is(err, ErrNoSnapshot) && !errors.Is(err, ErrNoEngine) {
			t.Fatalf("pick after %q: %v", data, err)
		}
	})
}
