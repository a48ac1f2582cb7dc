package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/aggregator"
	"github.com/ilb-router/ilb/services/enginesim"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestFaultKafkaDownAndBack proves the signal path loses and double counts
// nothing across a Kafka outage and an aggregator restart. Simulated
// engines serve 30 requests/s and publish a status and a completion event
// per request (idempotent producer, acks=all); an aggregator in a consumer
// group turns them into 1 s windows, committing offsets with each
// partition's window checkpoint only after its outputs are acknowledged.
// Then the broker (log and offsets on disk) is stopped for 3 s; while it is
// down the aggregator is stopped too, so its final publish and commit fail
// as in a crash. The engines keep answering every request, their signals
// wait in the producer's bounded buffer (none dropped; a second
// simulator with a 50-record buffer shows the bound: the excess is dropped
// and counted, nothing blocks), and once the
// broker is back a new aggregator resumes from the last committed offsets,
// re-reads what the dead one had not committed, and rebuilds the same
// windows. Checked at the end, record by record:
//
//   - the completion events in ilb.signals equal the requests the engines
//     answered (the producer neither lost nor duplicated one);
//   - a window published twice (before and after the restart) carries the
//     same rows both times;
//   - over the distinct windows, each engine's request count equals its
//     completion events exactly: no event lost, none counted twice.
func TestFaultKafkaDownAndBack(t *testing.T) {
	checkLeaks(t)
	fleet := parseFleet(t, smallFleet)
	ks := streamstest.NewKafkaServer(t, t.TempDir(), allTopics...)
	_, log := newLogSink(t, slog.LevelWarn)

	sc := enginesim.DefaultConfig()
	sc.Fleet, sc.TimeScale, sc.StatusInterval, sc.Logger = fleet, 10, 200*time.Millisecond, log
	sim, _ := startSim(t, sc, ks.Addrs())
	ac := fastAggregator(fleet, ks.Addrs(), "agg-kafka-fault", time.Second)
	_, agg1 := startAggregator(t, ac, nil, log)
	names := sim.EngineNames()
	load := startLoad(t, 30, func(ctx context.Context, c *http.Client, i int) (chatAnswer, error) {
		return chat(ctx, c, sim.BaseURL(names[i%len(names)]), "fe-a", fmt.Sprintf("c-%d", i), 5)
	})
	// A second simulator with a 50-record producer buffer and a status
	// event per engine every 20 ms, to a topic of its own, shows the bound
	// holding.
	bc := sc
	bc.Topic, bc.StatusInterval, bc.Producer.MaxBufferedRecords = "ilb.signals.bounded", 20*time.Millisecond, 50
	bounded, _ := startSim(t, bc, ks.Addrs())

	time.Sleep(3 * time.Second)
	windowsBefore, _ := featureWindows(t, ks.Addrs())
	ks.Stop()
	time.Sleep(time.Second)
	agg1.stop(t) // its last publish and commit fail: Kafka is down
	time.Sleep(2 * time.Second)
	outage := sim.Stats().Signals
	// The snapshot reads the published count, then the producer's; a
	// record refused by the full buffer is counted dropped by its promise,
	// which may not have run yet for the one record each engine's status
	// loop is producing at that moment (seen once: 51 waiting).
	if b := bounded.Stats().Signals; b.Published-b.Acked-b.Dropped > 50+uint64(len(names)) || b.Dropped == 0 {
		t.Errorf("bounded producer during the outage: %+v; want at most 50 waiting (plus one being produced per engine) and the rest dropped and counted", b)
	}
	ks.Restart()
	startAggregator(t, ac, nil, log)
	time.Sleep(3 * time.Second)
	load.stop()

	lc := load.counts()
	answered := lc.OK
	st := sim.Stats()
	if lc.Failed > 0 || answered == 0 {
		t.Fatalf("engines answered %d requests, %d failed: they must keep serving while Kafka is down", answered, lc.Failed)
	}
	waitUntil(t, 20*time.Second, "the buffered signals to be acknowledged", func() bool {
		s := sim.Stats().Signals
		return s.Acked+s.Failed >= s.Published
	})
	sig := sim.Stats().Signals
	if sig.Dropped != 0 || sig.Failed != 0 || sig.Acked != sig.Published {
		t.Errorf("signals: %+v; want every published one acknowledged, none failed or dropped", sig)
	}
	waitUntil(t, 20*time.Second, "the bounded producer to drain", func() bool {
		b := bounded.Stats().Signals
		return b.Acked+b.Dropped == b.Published
	})
	// A request whose client was cancelled by load.stop can still finish
	// in the engine after st was read, so compare against the simulator's
	// own count once it has settled: every answered request has exactly one
	// completion event (none lost, none duplicated).
	var completions map[string]int64
	var n int64
	settled := waitFor(20*time.Second, func() bool {
		st = sim.Stats()
		completions = completionsByEngine(t, ks.Addrs())
		n = total(completions)
		return n == int64(st.Served+st.Failed+st.Shed)
	})
	if !settled {
		t.Errorf("%d completion events in %s for %d requests answered", n, schemas.TopicSignals, st.Served+st.Failed+st.Shed)
	}
	var windows map[string][]schemas.Feature
	var dups int
	waitUntil(t, 20*time.Second, "every completion to be counted in a window", func() bool {
		windows, dups = featureWindows(t, ks.Addrs())
		counted := requestsByEngine(windows)
		for e, n := range counted {
			if n > completions[e] {
				t.Fatalf("engine %s: %d requests counted in windows for %d completion events: double counted", e, n, completions[e])
			}
		}
		return reflect.DeepEqual(counted, completions)
	})
	if dups >= len(windowsBefore) {
		t.Errorf("the new aggregator re-published %d windows, %d were out before the outage: it did not resume from the committed offsets", dups, len(windowsBefore))
	}
	if late := lateEvents(windows); late != 0 {
		t.Errorf("%d events arrived too late for their window: the outage must not make buffered events late", late)
	}
	b := bounded.Stats().Signals
	t.Logf("30 req/s; Kafka down 3 s (aggregator killed during it): %d requests answered, %d signals published (%d waiting in the producer buffer at the restart), %d acked, %d dropped; %d windows (%d before the outage), %d re-published identically; counted = completions per engine %v; 50-record producer: %d published, %d acked, %d dropped and counted",
		answered, sig.Published, outage.Published-outage.Acked, sig.Acked, sig.Dropped, len(windows), len(windowsBefore), dups, completions,
		b.Published, b.Acked, b.Dropped)
}

// readTopic reads every record of topic from the start to its current end.
func readTopic(t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx := shortCtx(t, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, len(out), want, ctx.Err())
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// completionsByEngine counts the completion events in ilb.signals.
func completionsByEngine(t testing.TB, brokers []string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	var ev schemas.Event
	for _, r := range readTopic(t, brokers, schemas.TopicSignals) {
		if err := schemas.DecodeEvent(r.Value, &ev); err != nil {
			t.Fatalf("a signal record does not decode: %v", err)
		}
		if ev.Kind == schemas.KindCompletion {
			out[ev.Completion.Engine]++
		}
	}
	return out
}

// featureWindows reads ilb.features into rows by window id (the
// aggregator's ilb-window header); it fails the test when one id was
// published twice with different rows, and returns how many were
// published more than once.
func featureWindows(t testing.TB, brokers []string) (map[string][]schemas.Feature, int) {
	t.Helper()
	out := map[string][]schemas.Feature{}
	dups := 0
	for _, r := range readTopic(t, brokers, schemas.TopicFeatures) {
		id := header(r, aggregator.HeaderWindow)
		rows := decodeFeatureRows(t, r.Value)
		if prev, ok := out[id]; ok {
			dups++
			if !reflect.DeepEqual(prev, rows) {
				t.Fatalf("window %s published twice with different rows:\n%+v\n%+v", id, prev, rows)
			}
			continue
		}
		out[id] = rows
	}
	return out, dups
}

func decodeFeatureRows(t testing.TB, value []byte) []schemas.Feature {
	t.Helper()
	recs, _, err := arrowipc.DecodeStream(value, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("a features record does not decode: %v", err)
	}
	defer arrowipc.Release(recs)
	var rows []schemas.Feature
	for _, rec := range recs {
		rs, err := schemas.FeaturesFromRecord(rec)
		if err != nil {
			t.Fatalf("feature rows: %v", err)
		}
		rows = append(rows, rs...)
	}
	return rows
}

// requestsByEngine sums the engine-level rows' request counts.
func requestsByEngine(windows map[string][]schemas.Feature) map[string]int64 {
	out := map[string]int64{}
	for _, rows := range windows {
		for _, r := range rows {
			if r.Cluster == "" && r.Requests > 0 {
				out[r.Engine] += int64(r.Requests)
			}
		}
	}
	return out
}

// lateEvents sums the events the windows counted as too late to apply.
func lateEvents(windows map[string][]schemas.Feature) uint64 {
	n := uint64(0)
	for _, rows := range windows {
		for _, r := range rows {
			if r.Cluster == "" {
				n += r.LateEvents
			}
		}
	}
	return n
}

func total(m map[string]int64) int64 {
	n := int64(0)
	for _, v := range m {
		n += v
	}
	return n
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
