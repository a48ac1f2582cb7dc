package aggregator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// restartStream makes a stream over 3 partitions, two engines on each:
// completions and status events over 12 s of event time, jittered by up to
// 250 ms, about 1 in 15 held back 1-3 s (late for hopping windows of 2 s
// every 1 s with 300 ms out-of-order and 200 ms lateness), then one status
// per engine at 20 s that closes every window before it.
func restartStream(t *testing.T) []*kgo.Record {
	r := rand.New(rand.NewPCG(7, 11))
	var recs []*kgo.Record
	for i := range 900 {
		p := int32(r.IntN(3))
		engine := fmt.Sprintf("e%d-%d", p, r.IntN(2))
		ts := float64(i)*12/900 + 0.25*r.Float64()
		if r.IntN(15) == 0 {
			ts -= 1 + 2*r.Float64()
		}
		ts = max(ts, 0)
		var ev schemas.Event
		if i%8 == 7 {
			ev = status(engine, at(ts), uint32(r.IntN(32)))
		} else {
			cl := []string{"fe-a", "fe-b", ""}[r.IntN(3)]
			ev = completion(engine, cl, at(ts), 50+400*r.Float64(), 10+20*r.Float64())
		}
		recs = append(recs, signal(t, p, ev))
	}
	for p := range int32(3) {
		for e := range 2 {
			recs = append(recs, signal(t, p, status(fmt.Sprintf("e%d-%d", p, e), at(20), 1)))
		}
	}
	return recs
}

func restartConfig(addrs []string) Config {
	cfg := testConfig(addrs, "g-restart")
	cfg.Window, cfg.Hop = 2*time.Second, time.Second
	cfg.OutOfOrder, cfg.AllowedLateness = 300*time.Millisecond, 200*time.Millisecond
	return cfg
}

// ends counts the records of each partition.
func ends(recs []*kgo.Record) map[int32]int64 {
	m := map[int32]int64{}
	for _, r := range recs {
		m[r.Partition]++
	}
	return m
}

// caughtUp reports whether the aggregator has handled every record up to
// the given per-partition ends and published all it emitted.
func caughtUp(a *Aggregator, want map[int32]int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.core.outbox) > 0 {
		return false
	}
	for p, n := range want {
		ps := a.core.parts[p]
		if ps == nil || ps.lastOffset != n-1 {
			return false
		}
	}
	return true
}

// published reports whether the aggregator has no output waiting to be
// published (nothing emitted is still in flight).
func published(a *Aggregator) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.core.outbox) == 0
}

// windowsByID decodes feature records into rows by window id, and fails
// the test if one id was published twice with different rows.
func windowsByID(t *testing.T, recs []*kgo.Record) (map[string][]schemas.Feature, int) {
	t.Helper()
	out := map[string][]schemas.Feature{}
	dups := 0
	for _, r := range recs {
		m := decodeFeatures(t, r)
		if prev, ok := out[m.id]; ok {
			dups++
			if !reflect.DeepEqual(prev, m.rows) {
				t.Errorf("window %s published twice with different rows:\n%+v\n%+v", m.id, prev, m.rows)
			}
			continue
		}
		out[m.id] = m.rows
	}
	return out, dups
}

// reference runs the whole stream through one aggregator without restart.
func reference(t *testing.T, stream []*kgo.Record) map[string][]schemas.Feature {
	addrs := streamstest.Kafka(t)
	producer(t, addrs)(stream...)
	r := start(t, restartConfig(addrs), Deps{})
	waitFor(t, 30*time.Second, "reference run", func() bool { return caughtUp(r.a, ends(stream)) })
	got, dups := windowsByID(t, readTopic(t, addrs, schemas.TopicFeatures).readToEnd(t, schemas.TopicFeatures, 30*time.Second))
	if dups != 0 {
		t.Errorf("reference run published %d windows twice", dups)
	}
	late := 0
	for _, rows := range got {
		for _, r := range rows {
			late += int(r.LateEvents)
		}
	}
	if len(got) < 20 || late == 0 {
		t.Fatalf("reference run: %d windows, %d late events; the stream should exercise both", len(got), late)
	}
	return got
}

func TestRestartMidWindowNeverDoubleCounts(t *testing.T) {
	stream := restartStream(t)
	want := reference(t, stream)
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean-stop", true: "crash"}[crash], func(t *testing.T) {
			addrs := streamstest.Kafka(t)
			send := producer(t, addrs)
			cut1, cut2 := 400, 600 // mid-window: event time about 5.3 s and 8 s
			send(stream[:cut1]...)
			first := start(t, restartConfig(addrs), Deps{})
			waitFor(t, 30*time.Second, "first instance", func() bool { return caughtUp(first.a, ends(stream[:cut1])) })
			if crash {
				// Work done from here on is published but never committed.
				first.a.noCommit.Store(true)
			}
			send(stream[cut1:cut2]...)
			waitFor(t, 30*time.Second, "first instance", func() bool { return caughtUp(first.a, ends(stream[:cut2])) })
			emitted := first.a.cnt.windows.Load()
			first.stop(t)

			send(stream[cut2:]...)
			second := start(t, restartConfig(addrs), Deps{})
			waitFor(t, 30*time.Second, "second instance", func() bool { return caughtUp(second.a, ends(stream)) })
			if emitted == 0 || second.a.cnt.windows.Load() == 0 || second.a.cnt.replayed.Load() == 0 {
				t.Fatalf("windows emitted %d before and %d after the restart, %d replayed events skipped: the restart was not mid-stream",
					emitted, second.a.cnt.windows.Load(), second.a.cnt.replayed.Load())
			}
			got, dups := windowsByID(t, readTopic(t, addrs, schemas.TopicFeatures).readToEnd(t, schemas.TopicFeatures, 30*time.Second))
			if dups > 0 {
				t.Errorf("%d windows published twice (identically); want none", dups)
			}
			// After the crash the second instance emits again what the
			// first published without committing, and publishes none of it.
			if again := second.a.cnt.republished.Load(); crash != (again > 0) {
				t.Errorf("%d windows emitted again and not published; want some only after a crash", again)
			}
			for _, id := range slices.Sorted(maps.Keys(want)) {
				if !reflect.DeepEqual(got[id], want[id]) {
					t.Errorf("window %s differs from the run without restart:\n got %+v\nwant %+v", id, got[id], want[id])
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d windows, want %d", len(got), len(want))
			}
		})
	}
}

// TestTwoInstancesSplitPartitions runs two aggregators in one group: they
// split the partitions, and together publish exactly the windows one
// instance publishes alone.
func TestTwoInstancesSplitPartitions(t *testing.T) {
	stream := restartStream(t)
	want := reference(t, stream)
	addrs := streamstest.Kafka(t)
	a := start(t, restartConfig(addrs), Deps{})
	b := start(t, restartConfig(addrs), Deps{})
	waitFor(t, 30*time.Second, "both instances to own partitions", func() bool {
		pa, pb := a.a.sortedParts(), b.a.sortedParts()
		return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == 3
	})
	producer(t, addrs)(stream...)
	waitFor(t, 30*time.Second, "both instances", func() bool {
		return a.a.cnt.windows.Load()+b.a.cnt.windows.Load() >= uint64(len(want)) && published(a.a) && published(b.a)
	})
	got, dups := windowsByID(t, readTopic(t, addrs, schemas.TopicFeatures).readToEnd(t, schemas.TopicFeatures, 30*time.Second))
	if dups != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("two instances: %d windows (%d duplicates), want the %d of one instance", len(got), dups, len(want))
	}
	if a.a.cnt.windows.Load() == 0 || b.a.cnt.windows.Load() == 0 {
		t.Errorf("windows emitted: %d and %d; both instances should work", a.a.cnt.windows.Load(), b.a.cnt.windows.Load())
	}
}
