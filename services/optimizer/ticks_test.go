package optimizer

import (
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// tickFleet has engines e0..e2 (or the named ones) and one cluster.
func tickFleet(t *testing.T, names ...string) *schemas.Fleet {
	t.Helper()
	f := &schemas.Fleet{MeanOutputTokens: 200, MaxUtilization: 0.9, ShedPenaltyMs: 60000,
		Clusters: []schemas.FleetCluster{{Name: "fe", Region: "r"}}}
	if len(names) == 0 {
		names = []string{"e0", "e1", "e2"}
	}
	for _, e := range names {
		f.Engines = append(f.Engines, schemas.FleetEngine{Name: e, Region: "r", SKU: "h100", Replicas: 1, MaxBatch: 8})
	}
	return f
}

const sec = int64(time.Second)

// row is engine e's row (cluster "" for the engine row) of the 10 s
// window ending at end seconds.
func row(e, cluster string, end int64) schemas.Feature {
	return schemas.Feature{Engine: e, Cluster: cluster, WindowStartUnixNano: (end - 10) * sec, WindowEndUnixNano: end * sec}
}

func TestTicksWaitForEveryExpectedEngine(t *testing.T) {
	tk := newTicks(tickFleet(t), 2*time.Second)
	t0 := time.Unix(1000, 0)
	if late := tk.addFeatures([]schemas.Feature{row("e0", "", 10), row("e0", "fe", 10), row("e1", "", 10)}, -1, t0); len(late) != 0 {
		t.Fatalf("late rows %v before any solve", late)
	}
	if end, ok := tk.ready(t0.Add(time.Second)); ok {
		t.Fatalf("window %d ready without e2", end)
	}
	if d := tk.deadline(); !d.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("deadline %v, want the first row's arrival + 2 s", d)
	}
	// Rows of the next window do not complete it ...
	tk.addFeatures([]schemas.Feature{row("e0", "", 20)}, -1, t0.Add(time.Second))
	if _, ok := tk.ready(t0.Add(time.Second)); ok {
		t.Fatal("window 10 ready on a row of window 20")
	}
	// ... e2's row does, and the solve takes only window 10's rows.
	tk.addFeatures([]schemas.Feature{row("e2", "", 10)}, -1, t0.Add(time.Second))
	end, ok := tk.ready(t0.Add(time.Second))
	if !ok || end != 10*sec {
		t.Fatalf("ready = %d, %v; want window 10", end, ok)
	}
	rows, _ := tk.take(end)
	if len(rows) != 4 {
		t.Fatalf("took %d rows, want window 10's 4", len(rows))
	}
	for _, r := range rows {
		if r.WindowEndUnixNano != 10*sec {
			t.Errorf("took a row of window %d", r.WindowEndUnixNano/sec)
		}
	}
	// A row of the solved window is late: handed back to apply at once.
	if late := tk.addFeatures([]schemas.Feature{row("e1", "fe", 10)}, -1, t0.Add(time.Second)); len(late) != 1 || tk.late != 1 {
		t.Errorf("late = %v (count %d), want the window-10 row back", late, tk.late)
	}
}

func TestTicksCompleteWithoutSilentEngines(t *testing.T) {
	tk := newTicks(tickFleet(t), 2*time.Second)
	t0 := time.Unix(1000, 0)
	both := func(end int64) []schemas.Feature { return []schemas.Feature{row("e0", "", end), row("e1", "", end)} }
	// e2 never reports. Window 10 completes when a row two windows later
	// arrives ...
	tk.addFeatures(both(10), -1, t0)
	tk.addFeatures(both(20), -1, t0)
	if _, ok := tk.ready(t0); ok {
		t.Fatal("window 10 ready with e2 missing and nothing two windows later")
	}
	tk.addFeatures(both(30), -1, t0)
	if end, ok := tk.ready(t0); !ok || end != 10*sec {
		t.Fatalf("ready = %d, %v; want window 10 once window 30 arrived", end, ok)
	}
	tk.take(10 * sec)
	// ... or after the wait, in wall time.
	if _, ok := tk.ready(t0.Add(1999 * time.Millisecond)); ok {
		t.Fatal("window 20 ready before the wait")
	}
	if end, ok := tk.ready(t0.Add(2 * time.Second)); !ok || end != 20*sec {
		t.Fatalf("ready = %d, %v; want window 20 after the wait", end, ok)
	}
	tk.take(20 * sec)
	tk.take(30 * sec)
	// After expectTicks windows without it, e2 is no longer awaited.
	tk.addFeatures(both(40), -1, t0.Add(10*time.Second))
	if end, ok := tk.ready(t0.Add(10 * time.Second)); !ok || end != 40*sec {
		t.Fatalf("ready = %d, %v; want window 40 at once: e2 silent for %d windows", end, ok, expectTicks)
	}
}

func TestTicksProfilesWaitAWindow(t *testing.T) {
	tk := newTicks(tickFleet(t), 2*time.Second)
	t0 := time.Unix(1000, 0)
	all := func(end int64) []schemas.Feature {
		return []schemas.Feature{row("e0", "", end), row("e1", "", end), row("e2", "", end)}
	}
	tk.addProfiles(10*sec, []schemas.Profile{{Engine: "e0", FittedAtUnixNano: 10 * sec}})
	tk.addFeatures(all(10), -1, t0)
	if _, profs := tk.take(10 * sec); len(profs) != 0 {
		t.Fatalf("a fit of window 10 used in window 10's solve: %v", profs)
	}
	tk.addFeatures(all(20), -1, t0)
	if _, profs := tk.take(20 * sec); len(profs) != 1 {
		t.Fatalf("profiles at window 20: %v, want the fit as of 10", profs)
	}
	// The records announce a fit as of 20 that has not arrived: window 30,
	// which must use it, waits for it (not for one as of 30, which it may
	// not use anyway).
	tk.announced = 30 * sec
	tk.addFeatures(all(30), -1, t0)
	if _, ok := tk.ready(t0); ok {
		t.Fatal("window 30 ready before the announced fit as of 20 arrived")
	}
	tk.addProfiles(20*sec, []schemas.Profile{{Engine: "e0", FittedAtUnixNano: 20 * sec}})
	if end, ok := tk.ready(t0); ok {
		t.Fatalf("window %d ready: the fit as of 20 is in, but one as of 30 was announced and nothing past 20 has arrived", end/sec)
	}
	tk.addProfiles(30*sec, []schemas.Profile{{Engine: "e0", FittedAtUnixNano: 30 * sec}})
	end, ok := tk.ready(t0)
	if !ok || end != 30*sec {
		t.Fatalf("ready = %d, %v; want window 30 once the profiles topic is past 20", end, ok)
	}
	if _, profs := tk.take(end); len(profs) != 1 || profs[0].FittedAtUnixNano != 20*sec {
		t.Fatalf("window 30 used %v, want only the fit as of 20", profs)
	}
}

// TestTicksFollowPartitionProgress: with the signals partition of each
// record known, a window waits for every partition that carries an
// expected engine, however far ahead another partition's windows are (a
// replay as fast as the brokers go), and completes without an engine as
// soon as its partition has delivered a later window.
func TestTicksFollowPartitionProgress(t *testing.T) {
	tk := newTicks(tickFleet(t, "e0", "e1", "e2", "e3"), 2*time.Second)
	t0 := time.Unix(1000, 0)
	p0 := func(end int64) []schemas.Feature { return []schemas.Feature{row("e0", "", end), row("e1", "", end)} }
	p1 := func(end int64, es ...string) []schemas.Feature {
		var out []schemas.Feature
		for _, e := range es {
			out = append(out, row(e, "", end))
		}
		return out
	}
	tk.addFeatures(p0(10), 0, t0)
	tk.addFeatures(p1(10, "e2", "e3"), 1, t0)
	if end, ok := tk.ready(t0); !ok || end != 10*sec {
		t.Fatalf("ready = %d, %v; want window 10 with every engine in", end, ok)
	}
	tk.take(10 * sec)
	// Partition 0 races ahead by three windows; partition 1 lags.
	for _, end := range []int64{20, 30, 40} {
		tk.addFeatures(p0(end), 0, t0)
	}
	if end, ok := tk.ready(t0); ok {
		t.Fatalf("window %d ready while partition 1 (e2, e3) has not delivered it", end/sec)
	}
	tk.addFeatures(p1(20, "e2", "e3"), 1, t0)
	if end, ok := tk.ready(t0); !ok || end != 20*sec {
		t.Fatalf("ready = %d, %v; want window 20 once partition 1 delivered it", end, ok)
	}
	tk.take(20 * sec)
	// e2 goes silent: partition 1's window 30 has only e3. Window 30 waits
	// until partition 1 shows a later window, then completes without e2.
	tk.addFeatures(p1(30, "e3"), 1, t0)
	if _, ok := tk.ready(t0); ok {
		t.Fatal("window 30 ready before partition 1 moved past it")
	}
	tk.addFeatures(p1(40, "e3"), 1, t0)
	if end, ok := tk.ready(t0); !ok || end != 30*sec {
		t.Fatalf("ready = %d, %v; want window 30 once partition 1 delivered window 40", end, ok)
	}
}
