package embedded_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(dir string) embedded.Config {
	cfg := embedded.DefaultConfig()
	cfg.KafkaListen = "127.0.0.1:0"
	cfg.NATSListen = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Partitions = 3
	return cfg
}

func start(t *testing.T, cfg embedded.Config) *embedded.Brokers {
	t.Helper()
	b, err := embedded.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func kafkaClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDefaultTopicsSeeded(t *testing.T) {
	b := start(t, testConfig(""))
	adm := kadm.NewClient(kafkaClient(t, b.KafkaAddrs()))
	topics, err := adm.ListTopics(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range embedded.DefaultTopics() {
		td, ok := topics[name]
		if !ok {
			t.Errorf("topic %s not seeded; have %v", name, topics.Names())
			continue
		}
		if got := len(td.Partitions); got != 3 {
			t.Errorf("topic %s has %d partitions, want 3", name, got)
		}
	}
}

func TestKafkaRoundTripAndAutoCreate(t *testing.T) {
	b := start(t, testConfig(""))
	ctx := ctxTimeout(t)
	const topic = "made.on.demand"
	prod := kafkaClient(t, b.KafkaAddrs(), kgo.AllowAutoTopicCreation())
	rec := &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("hello")}
	if err := prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce to auto-created topic: %v", err)
	}
	cons := kafkaClient(t, b.KafkaAddrs(), kgo.ConsumeTopics(topic))
	fs := cons.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatalf("poll: %v", err)
	}
	got := fs.Records()
	if len(got) != 1 || string(got[0].Value) != "hello" || string(got[0].Key) != "k" {
		t.Fatalf("consumed %v, want one record k=hello", got)
	}
}

func TestJetStreamKV(t *testing.T) {
	b := start(t, testConfig(""))
	if !strings.HasPrefix(b.NATSURL(), "nats://127.0.0.1:") {
		t.Fatalf("NATSURL = %q", b.NATSURL())
	}
	ctx := ctxTimeout(t)
	kv, err := jetStream(t, b.NATSURL()).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v1" {
		t.Fatalf("Get = %v, %v", e, err)
	}
}

// TestDataDirSurvivesRestart is the contract of `ilb brokers --data-dir`:
// state written before Close is there after a new Start on the same dir.
func TestDataDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxTimeout(t)

	b1, err := embedded.Start(ctx, testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := jetStream(t, b1.NATSURL()).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ilb-weights", History: 8})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "fe-a", []byte(`{"version":7}`))
	if err != nil {
		t.Fatal(err)
	}
	prod := kafkaClient(t, b1.KafkaAddrs())
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "ilb.signals", Partition: 0, Value: []byte("sig")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()
	if err := b1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	b2 := start(t, testConfig(dir))
	kv2, err := jetStream(t, b2.NATSURL()).KeyValue(ctx, "ilb-weights")
	if err != nil {
		t.Fatalf("bucket after restart: %v", err)
	}
	e, err := kv2.Get(ctx, "fe-a")
	if err != nil {
		t.Fatalf("key after restart: %v", err)
	}
	if string(e.Value()) != `{"version":7}` || e.Revision() != rev {
		t.Fatalf("after restart got %q rev %d, want %q rev %d", e.Value(), e.Revision(), `{"version":7}`, rev)
	}
	cons := kafkaClient(t, b2.KafkaAddrs(), kgo.ConsumeTopics("ilb.signals"))
	fs := cons.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "sig" {
		t.Fatalf("kafka after restart: %v (err %v)", recs, fs.Err())
	}
}

func TestWithoutDataDirTempStoreRemoved(t *testing.T) {
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "ilb-jetstream-*"))
	b, err := embedded.Start(t.Context(), testConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	during, _ := filepath.Glob(filepath.Join(os.TempDir(), "ilb-jetstream-*"))
	if len(during) != len(before)+1 {
		t.Fatalf("expected one new temp store dir, before %d during %d", len(before), len(during))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "ilb-jetstream-*"))
	if len(after) != len(before) {
		t.Fatalf("temp store dir left behind: %v", after)
	}
}

func TestOnlyOneBroker(t *testing.T) {
	cfg := testConfig("")
	cfg.NATSListen = ""
	b := start(t, cfg)
	if b.NATSURL() != "" || len(b.KafkaAddrs()) != 1 {
		t.Fatalf("kafka-only: NATSURL %q KafkaAddrs %v", b.NATSURL(), b.KafkaAddrs())
	}
	cfg = testConfig("")
	cfg.KafkaListen = ""
	b = start(t, cfg)
	if b.NATSURL() == "" || b.KafkaAddrs() != nil {
		t.Fatalf("nats-only: NATSURL %q KafkaAddrs %v", b.NATSURL(), b.KafkaAddrs())
	}
}

func TestUnspecifiedHostAdvertisesLoopback(t *testing.T) {
	cfg := testConfig("")
	cfg.KafkaListen = ":0"
	cfg.NATSListen = "0.0.0.0:0"
	b := start(t, cfg)
	host, _, _ := net.SplitHostPort(b.KafkaAddrs()[0])
	if host != "127.0.0.1" {
		t.Fatalf("KafkaAddrs = %v, want 127.0.0.1 host", b.KafkaAddrs())
	}
	if !strings.HasPrefix(b.NATSURL(), "nats://127.0.0.1:") {
		t.Fatalf("NATSURL = %q", b.NATSURL())
	}
	// The metadata a client gets must name the same reachable address.
	brokers, err := kadm.NewClient(kafkaClient(t, b.KafkaAddrs())).ListBrokers(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers) != 1 || brokers[0].Host != "127.0.0.1" {
		t.Fatalf("metadata brokers = %+v", brokers)
	}
}

func TestPortInUseFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, which := range []string{"kafka", "nats"} {
		cfg := testConfig("")
		if which == "kafka" {
			cfg.KafkaListen = ln.Addr().String()
		} else {
			cfg.NATSListen = ln.Addr().String()
		}
		began := time.Now()
		b, err := embedded.Start(t.Context(), cfg)
		if err == nil {
			b.Close()
			t.Fatalf("%s on a taken port: Start succeeded", which)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("%s on a taken port took %v to fail", which, d)
		}
	}
}

func TestRunClosesOnCancel(t *testing.T) {
	b, err := embedded.Start(t.Context(), testConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := nats.Connect(b.NATSURL(), nats.Timeout(time.Second), nats.MaxReconnects(0)); err == nil {
		t.Fatal("NATS still accepts connections after Run returned")
	}
}

func TestValidate(t *testing.T) {
	ok := embedded.DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	cases := map[string]func(*embedded.Config){
		"nothing to run":  func(c *embedded.Config) { c.KafkaListen, c.NATSListen = "", "" },
		"no port":         func(c *embedded.Config) { c.KafkaListen = "127.0.0.1" },
		"bad port":        func(c *embedded.Config) { c.NATSListen = "127.0.0.1:http" },
		"port too big":    func(c *embedded.Config) { c.NATSListen = "127.0.0.1:70000" },
		"zero partitions": func(c *embedded.Config) { c.Partitions = 0 },
		"bad topic":       func(c *embedded.Config) { c.Topics = []string{"a/b"} },
		"no shutdown":     func(c *embedded.Config) { c.ShutdownTimeout = 0 },
		"no start":        func(c *embedded.Config) { c.StartTimeout = -1 },
	}
	for name, mut := range cases {
		c := embedded.DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
		if _, err := embedded.Start(t.Context(), c); err == nil {
			t.Errorf("%s: Start accepted an invalid config", name)
		}
	}
}
