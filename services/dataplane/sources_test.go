package dataplane

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func version(d *DataPlane, cluster string) uint64 {
	c, _ := d.cluster(cluster)
	return c.cur.Load().version
}

// TestStatusEventsFromKafka: two data planes read engine status from
// Kafka; an unhealthy engine is skipped by both, to the same next
// choices, within the time a status event takes to arrive.
func TestStatusEventsFromKafka(t *testing.T) {
	addrs := streamstest.Kafka(t)
	kc := kafka.DefaultClientConfig()
	kc.Brokers = addrs
	deps, tel := withTelemetry(t)
	deps.Kafka, deps.Now = &kc, time.Now
	var dps []*DataPlane
	for range 2 {
		d := newDP(t, testConfig("fe-a"), deps)
		s := snap("fe-a", 1, threeWeights)
		s.CreatedAt = time.Now()
		mustSet(t, d, s)
		runDP(t, d)
		dps = append(dps, d)
	}
	before := picksOf(t, dps[0], "fe-a", 3000)
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(schemas.TopicSignals))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	publish := func(h schemas.Health, ready uint32) {
		ev := schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{
			Engine: "eng-b", TimeUnixNano: time.Now().UnixNano(), Health: h, ReadyReplicas: ready, TotalReplicas: 2}}
		v, err := schemas.AppendEvent(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("eng-b"), Value: v}, &kgo.Record{Key: []byte("junk"), Value: []byte{0xff, 0x01}})
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The consumers start at the end of the topic, so publish until both
	// have seen one (an engine publishes its status every second or so).
	took := waitFor(t, 15*time.Second, "both data planes to see eng-b unhealthy", func() bool {
		publish(schemas.HealthUnhealthy, 2)
		return !available(dps[0], "eng-b") && !available(dps[1], "eng-b")
	})
	t.Logf("status reached both data planes in %v", took)
	got := picksOf(t, dps[0], "fe-a", 3000)
	assertSame(t, got, picksOf(t, dps[1], "fe-a", 3000))
	for i := range got {
		if got[i] == "eng-b" || (before[i] != "eng-b" && got[i] != before[i]) {
			t.Fatalf("key %d: %s -> %s", i, before[i], got[i])
		}
	}
	if n := metricValue(t, tel.MetricsHandler(), metricSignalsBad, nil); n < 1 {
		t.Fatalf("%s = %v, want the junk records counted", metricSignalsBad, n)
	}
	waitFor(t, 15*time.Second, "eng-b back", func() bool {
		publish(schemas.HealthHealthy, 2)
		return available(dps[0], "eng-b") && available(dps[1], "eng-b")
	})
	assertSame(t, before, picksOf(t, dps[1], "fe-a", 3000))
}

// TestKVWatch: snapshots published to the weights bucket are swapped in;
// an older version or a bad value is rejected and routing stays.
func TestKVWatch(t *testing.T) {
	ctx := context.Background()
	cfg := kv.DefaultConfig()
	cfg.URL = streamstest.NATS(t)
	nc, js, err := kv.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deps, tel := withTelemetry(t)
	deps.JetStream, deps.NATS, deps.Now = js, nc, time.Now
	d := newDP(t, testConfig("fe-a"), deps)
	runDP(t, d) // before the bucket exists: Run waits for it
	bc := kv.DefaultBucketConfig(schemas.BucketWeights)
	bc.Storage = jetstream.MemoryStorage
	b, err := kv.EnsureBucket(ctx, js, bc)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, value []byte) {
		t.Helper()
		if _, err := b.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(v uint64, w map[string]float64) {
		t.Helper()
		s := snap("fe-a", v, w)
		s.CreatedAt = time.Now()
		put("fe-a", snapJSON(t, s))
	}
	publish(1, map[string]float64{"eng-a": 1})
	waitFor(t, 10*time.Second, "version 1 from KV", func() bool { return version(d, "fe-a") == 1 })
	publish(3, map[string]float64{"eng-b": 1})
	took := waitFor(t, 5*time.Second, "version 3 from KV", func() bool { return version(d, "fe-a") == 3 })
	t.Logf("publish to swap: %v", took)
	m := tel.MetricsHandler()
	rejected := func() float64 { return metricValue(t, m, metricRejected, map[string]string{"cluster": "fe-a"}) }
	publish(2, map[string]float64{"eng-a": 1})
	waitFor(t, 5*time.Second, "the older version rejected", func() bool { return rejected() == 1 })
	put("fe-a", []byte(`{"version": 9, "cluster": "fe-a", "weights": {"eng-a": 0.3}}`))
	waitFor(t, 5*time.Second, "the invalid snapshot rejected", func() bool { return rejected() == 2 })
	put("fe-other", snapJSON(t, snap("fe-other", 10, map[string]float64{"eng-a": 1}))) // not watched
	if v := version(d, "fe-a"); v != 3 || pickName(t, d, "fe-a", "k") != "eng-b" {
		t.Fatalf("after rejections: version %d, picks %s; want version 3 on eng-b", v, pickName(t, d, "fe-a", "k"))
	}
	if n := metricValue(t, m, metricPublishSwap+"_count", nil); n != 2 {
		t.Fatalf("%s_count = %v, want 2 swaps", metricPublishSwap, n)
	}
}

// TestSnapshotFileReload: edits with a bumped version take effect; an
// edit without a bump, or a broken file, is rejected and the previous
// snapshot keeps serving; a file snapshot never goes stale.
func TestSnapshotFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weights.json")
	write := func(s any) {
		t.Helper()
		b, ok := s.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(s); err != nil {
				t.Fatal(err)
			}
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	cfg := testConfig("fe-a")
	cfg.SnapshotFile = path
	cfg.StaleAfter = time.Millisecond
	deps, tel := withTelemetry(t)
	deps.Now = time.Now
	d := newDP(t, cfg, deps)
	if err := d.LoadSnapshotFile(); err != nil {
		t.Fatal(err)
	}
	runDP(t, d)
	write(snap("fe-a", 2, map[string]float64{"eng-b": 1}))
	waitFor(t, 5*time.Second, "version 2 from the file", func() bool { return version(d, "fe-a") == 2 })
	if got := pickName(t, d, "fe-a", "k"); got != "eng-b" {
		t.Fatalf("after the edit picks %s", got)
	}
	rejected := func(reason string) float64 {
		return metricValue(t, tel.MetricsHandler(), metricRejected, map[string]string{"reason": reason})
	}
	write(snap("fe-a", 2, map[string]float64{"eng-c": 1}))
	waitFor(t, 5*time.Second, "the unbumped edit rejected", func() bool { return rejected(RejectNotBumped) == 1 })
	write([]byte(`{"version": 3, "cluster": "fe-a", "weights": {"eng-c": 1`))
	waitFor(t, 5*time.Second, "the broken file rejected", func() bool { return rejected(RejectMalformed) == 1 })
	if got := pickName(t, d, "fe-a", "k"); got != "eng-b" || version(d, "fe-a") != 2 {
		t.Fatalf("after bad edits: version %d picks %s, want version 2 on eng-b", version(d, "fe-a"), got)
	}
	time.Sleep(3 * cfg.TickInterval)
	if c, _ := d.cluster("fe-a"); c.cur.Load().stale {
		t.Fatal("a file snapshot went stale")
	}
	write(snap("fe-a", 3, map[string]float64{"eng-c": 1}))
	waitFor(t, 5*time.Second, "version 3 from the file", func() bool { return version(d, "fe-a") == 3 })
}
