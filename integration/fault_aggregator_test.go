package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// rebalanceFleet is six small engines in one region, so that the three
// partitions of ilb.signals all carry some.
var rebalanceFleet = smallFleetHead + engineLines("e", "r", 6, smallEngine)

// faultAggregatorRebalance is the aggregator acceptance run, with
// every aggregator a separate `ilb aggregator` process in one consumer
// group: simulated engines publish signals under steady traffic; two
// aggregators split the partitions; one is killed with SIGKILL (its open
// windows are mid-way, its last work uncommitted); the other takes its
// partitions over when its session times out; a third joins later and
// takes some. The signals are then recorded (`ilb record`), replayed into
// a fresh broker (`ilb replay`) and aggregated by one `ilb aggregator`
// alone: the windows the group published are the same, window for window,
// with no duplicate and none missing. Lost: nothing.
func faultAggregatorRebalance(t *testing.T, bin string) {
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleetFile, rebalanceFleet)
	live := streamstest.Kafka(t, allTopics...)
	kafkaAddr := live[0]
	sim := startProc(t, bin, "engine-sim", "engine-sim", "--kafka", kafkaAddr, "--fleet", fleetFile, "--http", "127.0.0.1:0",
		"--time-scale", "10", "--status-interval", "200ms")
	simAddr := sim.waitMatch(t, `listening on http://(\S+)`)[1]
	traffic := startLoad(t, 20, func(ctx context.Context, c *http.Client, i int) (chatAnswer, error) {
		return chat(ctx, c, fmt.Sprintf("http://%s/engines/e-%d", simAddr, i%6), "fe-a", fmt.Sprintf("conv-%d", i%50), 8)
	})
	agg := func(name, kafka string) *proc {
		p := startProc(t, bin, name, "aggregator", "--kafka", kafka, "--fleet", fleetFile, "--group", "g-rebalance",
			"--window", "1s", "--idle-timeout", "3s", "--http", "127.0.0.1:0", "--log-level", "info")
		p.waitMatch(t, `partitions assigned`)
		return p
	}
	a := agg("aggregator-a", kafkaAddr)
	b := agg("aggregator-b", kafkaAddr)
	time.Sleep(4 * time.Second)
	a.kill(t)
	killed := time.Now()
	waitUntil(t, 40*time.Second, "aggregator-b to take over the killed one's partitions", func() bool {
		return len(b.out.Lines(assignedLine)) >= 2
	})
	takeover := time.Since(killed)
	time.Sleep(2 * time.Second)
	c := agg("aggregator-c", kafkaAddr)
	time.Sleep(4 * time.Second)
	traffic.stop()
	if code := sim.stop(t); code != 0 {
		t.Errorf("engine-sim exited %d", code)
	}
	settle(t, live)
	for _, p := range []*proc{b, c} {
		if code := p.stop(t); code != 0 {
			t.Errorf("%s exited %d on SIGTERM", p.name, code)
		}
	}
	got, dups := featureWindows(t, live)

	// One aggregator alone over the recorded stream.
	signals := endOffsets(t, live, schemas.TopicSignals)
	rec := filepath.Join(dir, "signals.arrow")
	recorder := startProc(t, bin, "record", "record", "--kafka", kafkaAddr, "--topics", schemas.TopicSignals, "--from", "start",
		"--max-records", strconv.FormatInt(signals, 10), "--out", rec)
	waitUntil(t, 30*time.Second, "the recording", func() bool { return !recorder.running() })
	ref := streamstest.Kafka(t, allTopics...)
	replay := startProc(t, bin, "replay", "replay", "--kafka", ref[0], "--in", rec, "--speed", "0")
	waitUntil(t, 30*time.Second, "the replay", func() bool { return !replay.running() })
	if recorder.code != 0 || replay.code != 0 {
		t.Fatalf("record exited %d, replay %d", recorder.code, replay.code)
	}
	alone := agg("aggregator-alone", ref[0])
	settle(t, ref)
	alone.stop(t)
	want, _ := featureWindows(t, ref)

	if dups != 0 {
		t.Errorf("%d windows published twice by the group", dups)
	}
	var differ, missingIDs, extra []string
	for _, id := range slices.Sorted(maps.Keys(want)) {
		switch g, ok := got[id]; {
		case !ok:
			missingIDs = append(missingIDs, id)
		case !reflect.DeepEqual(g, want[id]):
			differ = append(differ, id)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	if len(differ)+len(missingIDs)+len(extra) > 0 || len(want) < 20 {
		t.Errorf("group vs one aggregator: %d windows vs %d; %d differ (%v), %d missing (%v), %d extra (%v)",
			len(got), len(want), len(differ), first(differ), len(missingIDs), first(missingIDs), len(extra), first(extra))
	}
	lc := traffic.counts()
	t.Logf("aggregators: %d signals (%d requests answered), %d windows published by the group, %d by one aggregator over the replayed recording; %d duplicates; aggregator-a SIGKILLed, its partitions taken over %v later, aggregator-c joined after",
		signals, lc.OK, len(got), len(want), dups, takeover.Round(100*time.Millisecond))
}

var assignedLine = regexpMust(`partitions assigned`)

// settle waits until ilb.features on brokers has stopped growing for 6 s
// (twice the test's idle timeout): every window is out.
func settle(t *testing.T, brokers []string) {
	t.Helper()
	last, since := int64(-1), time.Now()
	waitUntil(t, 60*time.Second, "ilb.features to stop growing", func() bool {
		n := endOffsets(t, brokers, schemas.TopicFeatures)
		if n != last {
			last, since = n, time.Now()
		}
		return n > 0 && time.Since(since) > 6*time.Second
	})
}

// endOffsets sums topic's end offsets: how many records it holds.
func endOffsets(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	cl := streamstest.KafkaClient(t, brokers)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(shortCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// first returns up to three of ids, for messages.
func first(ids []string) []string { return ids[:min(3, len(ids))] }

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }
