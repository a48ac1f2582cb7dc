package optimizer

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// brokers are a test's embedded Kafka and NATS.
type brokers struct {
	kafka []string
	nats  string
	js    jetstream.JetStream
	prod  *kgo.Client
}

func newBrokers(t testing.TB) *brokers {
	t.Helper()
	b := &brokers{kafka: streamstest.Kafka(t, schemas.TopicFeatures, TopicProfiles), nats: streamstest.NATS(t)}
	b.js = jetStream(t, b.nats)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.kafka...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b.prod = cl
	return b
}

// testConfig is a fast configuration: solves as soon as input arrives,
// every solve published.
func testConfig(f *schemas.Fleet, id string) Config {
	cfg := DefaultConfig(f)
	cfg.ID = id
	cfg.MinInterval, cfg.SettleDelay, cfg.MaxInterval = 20*time.Millisecond, 10*time.Millisecond, time.Minute
	cfg.MinChange = 0
	cfg.LeaseDuration = 0
	return cfg
}

// start runs an optimizer until the returned stop is called (or the test
// ends) and checks that Run returned cleanly.
func (b *brokers) start(t testing.TB, cfg Config) (*Optimizer, func()) {
	t.Helper()
	kc := kafka.DefaultClientConfig()
	kc.Brokers = b.kafka
	o, err := New(cfg, Deps{JetStream: b.js, Kafka: &kc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("optimizer %s: Run: %v", cfg.ID, err)
				}
			case <-time.After(15 * time.Second):
				t.Errorf("optimizer %s: Run did not return", cfg.ID)
			}
		})
	}
	t.Cleanup(stop)
	return o, stop
}

// produceFeatures sends rows as one ilb.features record, as the
// aggregator does: Arrow IPC stream, key = window end in nanoseconds.
func (b *brokers) produceFeatures(t testing.TB, rows []schemas.Feature) {
	t.Helper()
	rec := schemas.FeaturesToRecord(memory.DefaultAllocator, rows)
	defer rec.Release()
	value, err := arrowipc.EncodeStream(schemas.FeatureSchema, rec)
	if err != nil {
		t.Fatal(err)
	}
	key := strconv.FormatInt(rows[0].WindowEndUnixNano, 10)
	b.produce(t, schemas.TopicFeatures, key, value, schemas.FeatureSchemaVersion)
}

func (b *brokers) produceProfiles(t testing.TB, rows []schemas.Profile) {
	t.Helper()
	rec := schemas.ProfilesToRecord(memory.DefaultAllocator, rows)
	defer rec.Release()
	value, err := arrowipc.EncodeStream(schemas.ProfileSchema, rec)
	if err != nil {
		t.Fatal(err)
	}
	b.produce(t, TopicProfiles, "profiles", value, schemas.ProfileSchemaVersion)
}

func (b *brokers) produce(t testing.TB, topic, key string, value []byte, schema string) {
	t.Helper()
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: value,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schema)}}}
	if err := b.prod.ProduceSync(testCtx(t, 10*time.Second), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// served reads the manifest and every cluster's snapshot. The optimizer
// claims a version in the manifest before it writes the cluster keys, so
// this waits (up to 10 s) until each key holds the version the manifest
// lists for it.
func (b *brokers) served(t testing.TB, f *schemas.Fleet) (*schemas.Manifest, map[string]*schemas.Snapshot) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	bucket, err := b.js.KeyValue(ctx, schemas.BucketWeights)
	if err != nil {
		t.Fatal(err)
	}
	for {
		man, out := b.readServed(t, ctx, bucket, f)
		complete := true
		for _, c := range f.Clusters {
			if out[c.Name] == nil || out[c.Name].Version < man.Clusters[c.Name] {
				complete = false
			}
		}
		if complete {
			return man, out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cluster keys never reached manifest v%d: %v", man.Version, man.Clusters)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *brokers) readServed(t testing.TB, ctx context.Context, bucket jetstream.KeyValue, f *schemas.Fleet) (*schemas.Manifest, map[string]*schemas.Snapshot) {
	t.Helper()
	e, err := kv.Get(ctx, bucket, schemas.ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	man, err := schemas.DecodeManifest(e.Value)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*schemas.Snapshot{}
	for _, c := range f.Clusters {
		e, err := kv.Get(ctx, bucket, c.Name)
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("cluster %s: %v", c.Name, err)
		}
		if out[c.Name], err = schemas.DecodeSnapshot(e.Value); err != nil {
			t.Fatalf("cluster %s: %v", c.Name, err)
		}
	}
	return man, out
}

// version is the manifest's version, 0 before the first publish.
func (b *brokers) version(t testing.TB) uint64 {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	bucket, err := b.js.KeyValue(ctx, schemas.BucketWeights)
	if err != nil {
		return 0
	}
	e, err := kv.Get(ctx, bucket, schemas.ManifestKey)
	if err != nil {
		return 0
	}
	m, err := schemas.DecodeManifest(e.Value)
	if err != nil {
		t.Fatal(err)
	}
	return m.Version
}

func weightsOf(snaps map[string]*schemas.Snapshot) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for c, s := range snaps {
		out[c] = s.Weights
	}
	return out
}
