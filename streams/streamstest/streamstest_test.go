package streamstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestKafkaSeedsGivenTopics(t *testing.T) {
	addrs := streamstest.Kafka(t, "a", "b")
	topics, err := kadm.NewClient(client(t, addrs)).ListTopics(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	names := topics.Names()
	if len(names) != 2 || names[0] != "a" || names[1] != "b" {
		t.Fatalf("topics = %v, want [a b]", names)
	}
	if n := len(topics["a"].Partitions); n != streamstest.Partitions {
		t.Fatalf("partitions = %d, want %d", n, streamstest.Partitions)
	}
}

func produceOne(t *testing.T, ctx context.Context, addrs []string, value string) {
	t.Helper()
	cl := client(t, addrs)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()
}

func countRecords(t *testing.T, ctx context.Context, addrs []string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(client(t, addrs)).ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

func TestKafkaRestartSameAddress(t *testing.T) {
	for _, persist := range []bool{true, false} {
		dir := ""
		if persist {
			dir = t.TempDir()
		}
		ctx := ctxTimeout(t)
		k := streamstest.NewKafkaServer(t, dir, "t")
		addrs := k.Addrs()
		produceOne(t, ctx, addrs, "x")
		k.Restart()
		if got := k.Addrs(); got[0] != addrs[0] {
			t.Fatalf("address changed on restart: %v -> %v", addrs, got)
		}
		want := int64(0)
		if persist {
			want = 1
		}
		if n := countRecords(t, ctx, addrs); n != want {
			t.Fatalf("persist=%v: %d records after restart, want %d", persist, n, want)
		}
	}
}

func TestKafkaStopRefusesClients(t *testing.T) {
	k := streamstest.NewKafkaServer(t, "", "t")
	k.Stop()
	k.Stop() // idempotent
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	cl := client(t, k.Addrs())
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded against a stopped broker")
	}
}

// TestNATSRestartKeepsStateAndClientReconnects is the fault the data plane
// must ride out: the server goes away and comes back at the same URL.
func TestNATSRestartKeepsStateAndClientReconnects(t *testing.T) {
	n := streamstest.NewNATSServer(t, "")
	ctx := ctxTimeout(t)
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	url := n.URL()
	n.Stop()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = kv.Get(short, "k")
	cancel()
	if err == nil {
		t.Fatal("Get succeeded while the server was stopped")
	}
	n.Restart()
	if n.URL() != url || n.Port() == 0 {
		t.Fatalf("URL changed on restart: %s -> %s", url, n.URL())
	}
	for {
		short, cancel := context.WithTimeout(ctx, time.Second)
		e, err := kv.Get(short, "k")
		cancel()
		if err == nil {
			if string(e.Value()) != "v" {
				t.Fatalf("after restart k = %q", e.Value())
			}
			return
		}
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatal("key lost across restart")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("client did not recover after restart: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestNATSHelper(t *testing.T) {
	nc, err := nats.Connect(streamstest.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(ctxTimeout(t)); err != nil {
		t.Fatalf("JetStream not enabled: %v", err)
	}
}
