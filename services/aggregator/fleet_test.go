package aggregator

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// testFleet is a fleet of the named engines, each with max batch 16.
func testFleet(engines ...string) *schemas.Fleet {
	f := &schemas.Fleet{}
	for _, e := range engines {
		f.Engines = append(f.Engines, schemas.FleetEngine{Name: e, SKU: "h100", MaxBatch: 16, Replicas: 1})
	}
	return f
}

// A live fleet change: an engine added to the fleet gets its max batch
// (utilization) in the windows after the change, an engine removed from
// it leaves the fits (its history, its profile, its later windows), and
// the profile table is published again without it.
func TestSetFleet(t *testing.T) {
	addrs := streamstest.Kafka(t)
	send := producer(t, addrs)
	want := regress.Profile{CapacityRPS: 120, TTFTBaseMs: 100, TTFTQueueMs: 40, TBOTBaseMs: 20, TBOTSlopeMs: 10}
	var recs []*kgo.Record
	for k := range 10 {
		load := 10 + 8*k
		for i := range load {
			ts := float64(k) + float64(i)/float64(load)
			recs = append(recs, signal(t, 0, completion("fit", "", at(ts), want.TTFTMs(float64(load)), want.TBOTMs(float64(load)))))
		}
	}
	recs = append(recs, signal(t, 0, status("new", at(9.5), 8)), signal(t, 0, status("new", at(10.5), 0)))
	send(recs...)

	cfg := testConfig(addrs, "g-fleet")
	cfg.Regress.MinSamples = 8
	cfg.ConfigFromFleet(testFleet("fit"))
	r := start(t, cfg, Deps{})
	waitFor(t, 20*time.Second, "the first windows", func() bool { return caughtUp(r.a, ends(recs)) })
	r.a.Refit()
	first := profileRows(t, readTopic(t, addrs, TopicProfiles).waitN(t, 1, 20*time.Second)[0])
	if len(first) != 1 || first[0].Engine != "fit" {
		t.Fatalf("profiles before the change: %+v", first)
	}
	if u, ok := latestRow(r.a, "new"); !ok || u != 0 {
		t.Fatalf("engine new before the fleet lists it: utilization %v (found %v), want 0", u, ok)
	}

	if err := r.a.SetFleet(testFleet("new")); err != nil {
		t.Fatal(err)
	}
	more := []*kgo.Record{
		signal(t, 0, status("new", at(11.5), 8)),             // 8 of 16
		signal(t, 0, completion("fit", "", at(11.6), 90, 9)), // a drained engine still reporting
		signal(t, 0, status("new", at(12.5), 0)),             // closes [11, 12)
	}
	send(more...)
	waitFor(t, 20*time.Second, "the window after the change", func() bool {
		u, ok := latestRow(r.a, "new")
		return ok && u == 0.5 && r.a.Features().WindowEnd.Equal(time.Unix(0, at(12)).UTC())
	})
	r.a.Refit()
	msgs := readTopic(t, addrs, TopicProfiles)
	waitFor(t, 20*time.Second, "the profiles view without engine fit", func() bool {
		v := r.a.Profiles()
		return len(v.Profiles) == 0 && len(v.Fits) == 0
	})
	r.a.hist.mu.Lock()
	_, kept := r.a.hist.engines["fit"]
	r.a.hist.mu.Unlock()
	if kept {
		t.Error("the removed engine's history is kept")
	}
	// The table was published once: the empty table is not a record, and
	// no fit of the removed engine followed.
	if got := msgs.readToEnd(t, TopicProfiles, 5*time.Second); len(got) != 1 {
		t.Errorf("%d profiles records, want 1", len(got))
	}
}

// latestRow returns the utilization of engine's row in the latest window.
func latestRow(a *Aggregator, engine string) (float64, bool) {
	for _, r := range a.Features().Rows {
		if r.Engine == engine && r.Cluster == "" {
			return r.Utilization, true
		}
	}
	return 0, false
}
