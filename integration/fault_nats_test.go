package integration

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestFaultNATSDownAndBack proves that the weight path survives a NATS
// outage with nothing lost and nothing going backwards. NATS (JetStream,
// state on disk) is stopped for 2 s and restarted on the same port while
// an optimizer publishes every 500 ms and a client asks a data plane for a
// pick every 10 ms. While NATS is down every pick succeeds on the last
// snapshot and both services keep running (a publish in flight either
// fails and is counted, or is delivered from the client's reconnect
// buffer once NATS is back; either way the version is new). Once
// NATS is back: the optimizer's connection and the data plane's watcher
// reconnect by themselves, the watcher re-reads the key and catches up to
// the optimizer's newest version within seconds, and the re-delivery of
// the snapshot in use is a no-op, not a rejection. Then an older snapshot
// is put into the bucket behind the optimizer's back (a stale writer, or
// the bucket rolled back by hand without bumping the version): the data
// plane rejects it as old_version and keeps the newer one. Versions seen by
// the client never go back. Lost: nothing.
func TestFaultNATSDownAndBack(t *testing.T) {
	checkLeaks(t)
	fleet := parseFleet(t, smallFleet)
	brokers := streamstest.Kafka(t, allTopics...)
	ns := streamstest.NewNATSServer(t, "")
	_, log := newLogSink(t, slog.LevelWarn)
	dpm, om := newMeter(t), newMeter(t)

	opt := startOptimizer(t, fastOptimizer(fleet, "opt"), brokers, ns.URL(), om, log)
	dp := startDataplane(t, fastDataplane(time.Minute, "fe-a"), dataplaneDeps{natsURL: ns.URL(), meter: dpm, log: log, name: "dp"})
	waitUntil(t, 15*time.Second, "the first snapshot at the data plane", func() bool { return dp.ready("fe-a") })
	picks := startPicks(t, dp.url, "fe-a", 10*time.Millisecond, 200)
	c := httpClient(t, 5*time.Second)
	waitUntil(t, 10*time.Second, "version 3", func() bool { return routing(t, c, dp.url, "fe-a").Version >= 3 })
	old := snapshotAt(t, ns.URL(), "fe-a") // a version the optimizer will supersede

	ns.Stop()
	down := routing(t, c, dp.url, "fe-a")
	time.Sleep(2 * time.Second)
	if v := routing(t, c, dp.url, "fe-a").Version; v != down.Version {
		t.Errorf("version changed from %d to %d while NATS was down", down.Version, v)
	}
	duringOutage := picks.counts()
	ns.Restart()

	waitUntil(t, 15*time.Second, "the data plane to catch up with the optimizer after the restart", func() bool {
		v := routing(t, c, dp.url, "fe-a").Version
		return v > down.Version && v >= opt.o.State().Version-1
	})
	if !opt.s.running() || !dp.s.running() {
		t.Fatal("a service stopped during the NATS outage")
	}
	if n := rejected(t, dpm, ""); n != 0 {
		t.Errorf("%v snapshots rejected after the reconnect; re-delivery of the snapshot in use must be a no-op", n)
	}

	// A stale writer puts an older version back into the bucket.
	current := routing(t, c, dp.url, "fe-a").Version
	putSnapshot(t, ns.URL(), old)
	waitUntil(t, 5*time.Second, "the old snapshot to be rejected", func() bool { return rejected(t, dpm, "old_version") == 1 })
	if v := routing(t, c, dp.url, "fe-a").Version; v < current {
		t.Errorf("the data plane went back from version %d to %d", current, v)
	}
	// The optimizer goes on publishing above it.
	waitUntil(t, 10*time.Second, "a version above the stale write", func() bool {
		return routing(t, c, dp.url, "fe-a").Version > current
	})
	picks.stop()
	pc := picks.counts()
	pc.check(t)
	t.Logf("NATS down 2 s at v%d: %d picks during the outage, %d in all, %d failed; caught up to v%d; old v%d rejected; optimizer publishes ok %v, error %v",
		down.Version, duringOutage.Sent, pc.Sent, pc.Failed, pc.Last, old.Version,
		om.value(t, "ilb.optimizer.publish", attribute.String("result", "ok")),
		om.value(t, "ilb.optimizer.publish", attribute.String("result", "error")))
}

// rejected is ilb_dataplane_snapshots_rejected_total for reason ("" for
// every reason).
func rejected(t testing.TB, m *meter, reason string) float64 {
	if reason == "" {
		return m.value(t, "ilb_dataplane_snapshots_rejected_total")
	}
	return m.value(t, "ilb_dataplane_snapshots_rejected_total", attribute.String("reason", reason))
}

// snapshotAt reads the current snapshot of cluster from the weights
// bucket with a connection of its own.
func snapshotAt(t testing.TB, natsURL, cluster string) *schemas.Snapshot {
	t.Helper()
	_, js := connectNATSKV(t, natsConfig(natsURL, "test-reader"))
	b := weightsBucket(t, js)
	e, err := b.Get(shortCtx(t, 5*time.Second), cluster)
	if err != nil {
		t.Fatalf("get %s: %v", cluster, err)
	}
	s, err := schemas.DecodeSnapshot(e.Value())
	if err != nil {
		t.Fatalf("decode %s: %v", cluster, err)
	}
	return s
}

// putSnapshot writes s into the weights bucket as is, bypassing the
// optimizer.
func putSnapshot(t testing.TB, natsURL string, s *schemas.Snapshot) {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	putRaw(t, natsURL, s.Cluster, data)
}

// putRaw writes value under key into the weights bucket.
func putRaw(t testing.TB, natsURL, key string, value []byte) {
	t.Helper()
	_, js := connectNATSKV(t, natsConfig(natsURL, "test-writer"))
	if _, err := weightsBucket(t, js).Put(shortCtx(t, 5*time.Second), key, value); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func weightsBucket(t testing.TB, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	b, err := js.KeyValue(shortCtx(t, 5*time.Second), schemas.BucketWeights)
	if err != nil {
		t.Fatalf("weights bucket: %v", err)
	}
	return b
}
