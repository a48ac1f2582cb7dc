package aggregator

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// fitStream is 30 one-second windows of six engines of one SKU, two on
// each of three partitions, whose completions follow a known profile at a
// load that moves from window to window (so fits are accepted), then one
// status per engine at 40 s that closes every window.
func fitStream(t *testing.T) []*kgo.Record {
	want := regress.Profile{CapacityRPS: 120, TTFTBaseMs: 100, TTFTQueueMs: 40, TBOTBaseMs: 20, TBOTSlopeMs: 10}
	var recs []*kgo.Record
	for k := range 30 {
		for p := range int32(3) {
			for e := range 2 {
				engine := fmt.Sprintf("e%d-%d", p, e)
				load := 10 + 8*((k+3*int(p)+e)%12)
				for i := range load {
					ts := float64(k) + float64(i)/float64(load)
					recs = append(recs, signal(t, p, completion(engine, "fe-a", at(ts), want.TTFTMs(float64(load)), want.TBOTMs(float64(load)))))
				}
			}
		}
	}
	for p := range int32(3) {
		for e := range 2 {
			recs = append(recs, signal(t, p, status(fmt.Sprintf("e%d-%d", p, e), at(40), 1)))
		}
	}
	return recs
}

func fitConfig(addrs []string) Config {
	cfg := testConfig(addrs, "g-fits")
	cfg.ProfileInterval = 6 * time.Second
	cfg.SKUs, cfg.Replicas = map[string]string{}, map[string]int{}
	for p := range 3 {
		for e := range 2 {
			cfg.SKUs[fmt.Sprintf("e%d-%d", p, e)] = "h100"
		}
	}
	return cfg
}

// fitsByAsOf decodes profiles records by their ilb-as-of header and
// counts the as-of times published more than once.
func fitsByAsOf(t *testing.T, recs []*kgo.Record) (map[string][]schemas.Profile, int) {
	t.Helper()
	out := map[string][]schemas.Profile{}
	dups := 0
	for _, r := range recs {
		asOf := header(r, schemas.HeaderAsOf)
		if _, ok := out[asOf]; ok {
			dups++
		}
		out[asOf] = profileRows(t, r)
	}
	return out, dups
}

// TestRebalanceCrashThenJoin is the rebalance in process: two
// aggregators in one group, one of them stopped as a crash would leave it
// (its windows and fits published, nothing committed since a point mid-
// stream), a third joining later. Together they publish exactly the
// windows one aggregator alone publishes over the same stream, each once,
// and exactly its profile fits, each as-of time once, the SKU fit pooling
// the engines of every partition.
func TestRebalanceCrashThenJoin(t *testing.T) {
	stream := fitStream(t)
	cut1, cut2 := len(stream)/3, 2*len(stream)/3

	refAddrs := streamstest.Kafka(t)
	producer(t, refAddrs)(stream...)
	ref := start(t, fitConfig(refAddrs), Deps{})
	waitFor(t, 30*time.Second, "the reference", func() bool { return caughtUp(ref.a, ends(stream)) })
	wantWindows, _ := windowsByID(t, readTopic(t, refAddrs, schemas.TopicFeatures).readToEnd(t, schemas.TopicFeatures, 30*time.Second))
	wantFits, _ := fitsByAsOf(t, readTopic(t, refAddrs, TopicProfiles).readToEnd(t, TopicProfiles, 30*time.Second))
	if len(wantFits) < 3 {
		t.Fatalf("the reference published %d fits; the stream should give several", len(wantFits))
	}
	// Every fit sees all six engines, on three partitions: the SKU row
	// pools the same number of windows of each (the first fits have too
	// few for an engine alone, and only the SKU is accepted).
	for asOf, rows := range wantFits {
		var engines, sum, sku uint64
		for _, r := range rows {
			if r.Engine != "" {
				engines, sum = engines+1, sum+r.Samples
			} else if r.SKU == "h100" {
				sku = r.Samples
			}
		}
		if sku == 0 || sku%6 != 0 || (engines != 0 && (engines != 6 || sku != sum)) {
			t.Fatalf("reference fit as of %s: %d engines, SKU on %d windows of their %d", asOf, engines, sku, sum)
		}
	}

	addrs := streamstest.Kafka(t)
	send := producer(t, addrs)
	a := start(t, fitConfig(addrs), Deps{})
	b := start(t, fitConfig(addrs), Deps{})
	waitFor(t, 30*time.Second, "two members sharing the partitions", func() bool {
		pa, pb := a.a.sortedParts(), b.a.sortedParts()
		return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == 3
	})
	send(stream[:cut1]...)
	both := func(n []*kgo.Record) func() bool {
		return func() bool { return caughtUpSome(a.a, ends(n)) && caughtUpSome(b.a, ends(n)) }
	}
	waitFor(t, 30*time.Second, "the first third", both(stream[:cut1]))
	// The fitter crashes: the fits must move too.
	if !a.a.fitter.Load() {
		a, b = b, a
	}
	if !a.a.fitter.Load() {
		t.Fatal("neither member fits profiles")
	}
	a.a.noCommit.Store(true) // from here a's work is published, never committed
	send(stream[cut1:cut2]...)
	waitFor(t, 30*time.Second, "the second third", both(stream[:cut2]))
	a.stop(t)
	waitFor(t, 30*time.Second, "b to own every partition", func() bool { return len(b.a.sortedParts()) == 3 && b.a.fitter.Load() })
	c := start(t, fitConfig(addrs), Deps{})
	waitFor(t, 30*time.Second, "c to join", func() bool { return len(c.a.sortedParts()) > 0 })
	send(stream[cut2:]...)
	waitFor(t, 30*time.Second, "b and c to finish", func() bool {
		return caughtUpSome(b.a, ends(stream)) && caughtUpSome(c.a, ends(stream)) && published(b.a) && published(c.a)
	})

	waitFor(t, 30*time.Second, "the last fit", func() bool {
		b.a.mu.Lock()
		defer b.a.mu.Unlock()
		return b.a.lastFitAt >= lastAsOf(wantFits) && len(b.a.core.outbox) == 0
	})
	gotWindows, dups := windowsByID(t, readTopic(t, addrs, schemas.TopicFeatures).readToEnd(t, schemas.TopicFeatures, 30*time.Second))
	if dups != 0 {
		t.Errorf("%d windows published twice", dups)
	}
	for _, id := range slices.Sorted(maps.Keys(wantWindows)) {
		if !reflect.DeepEqual(gotWindows[id], wantWindows[id]) {
			t.Errorf("window %s differs from one aggregator's:\n got %+v\nwant %+v", id, gotWindows[id], wantWindows[id])
		}
	}
	if len(gotWindows) != len(wantWindows) {
		t.Errorf("%d windows, want %d", len(gotWindows), len(wantWindows))
	}
	gotFits, fitDups := fitsByAsOf(t, readTopic(t, addrs, TopicProfiles).readToEnd(t, TopicProfiles, 30*time.Second))
	if fitDups != 0 {
		t.Errorf("%d fits published twice", fitDups)
	}
	if !reflect.DeepEqual(gotFits, wantFits) {
		t.Errorf("fits as of %v, want as of %v", slices.Sorted(maps.Keys(gotFits)), slices.Sorted(maps.Keys(wantFits)))
		for asOf, rows := range wantFits {
			if !reflect.DeepEqual(gotFits[asOf], rows) {
				t.Errorf("fit as of %s differs from one aggregator's:\n got %+v\nwant %+v", asOf, gotFits[asOf], rows)
			}
		}
	}
	again := b.a.cnt.republished.Load() + c.a.cnt.republished.Load()
	if again == 0 {
		t.Errorf("no window was emitted again after the crash: the test did not cut between a publish and its commit")
	}
	t.Logf("%d windows, %d fits; the fitter crashed with uncommitted work, %d windows emitted again and not published; fitter after: b %v, c %v",
		len(gotWindows), len(gotFits), again, b.a.fitter.Load(), c.a.fitter.Load())
}

// lastAsOf is the newest as-of time of fits.
func lastAsOf(fits map[string][]schemas.Profile) int64 {
	var out int64
	for k := range fits {
		v, _ := strconv.ParseInt(k, 10, 64)
		out = max(out, v)
	}
	return out
}

// caughtUpSome is caughtUp over the partitions the aggregator owns.
func caughtUpSome(a *Aggregator, want map[int32]int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.core.outbox) > 0 {
		return false
	}
	for p, ps := range a.core.parts {
		if ps.lastOffset != want[p]-1 {
			return false
		}
	}
	return true
}
