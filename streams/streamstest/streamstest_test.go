package streamstest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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

func TestKafkaSeedsGivenTopics(t *testing.T) {
	addrs := streamstest.Kafka(t, "a", "b")
	topics, err := kadm.NewClient(streamstest.KafkaClient(t, addrs)).ListTopics(ctxTimeout(t))
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
	cl := streamstest.KafkaClient(t, addrs)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()
}

func countRecords(t *testing.T, ctx context.Context, addrs []string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(streamstest.KafkaClient(t, addrs)).ListEndOffsets(ctx, "t")
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
	cl := streamstest.KafkaClient(t, k.Addrs())
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

// TestNATSWithUsersChecksPasswords: the server admits a listed user with
// its password and refuses a wrong password and an unknown user, and
// JetStream works for the admitted one.
func TestNATSWithUsersChecksPasswords(t *testing.T) {
	addr := streamstest.NATSWithUsers(t, streamstest.User{Name: "a", Password: "pw-a"},
		streamstest.User{Name: "b", Password: "pw-b"})
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{{"a", "pw-a", true}, {"b", "pw-b", true}, {"a", "pw-b", false}, {"c", "pw-a", false}} {
		nc, err := nats.Connect("nats://"+addr, nats.UserInfo(c.user, c.pass))
		if !c.ok {
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Errorf("%s/%s: %v, want an authorization violation", c.user, c.pass, err)
			}
			if err == nil {
				nc.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s/%s: %v", c.user, c.pass, err)
		}
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = js.AccountInfo(ctxTimeout(t))
		}
		nc.Close()
		if err != nil {
			t.Errorf("%s: JetStream: %v", c.user, err)
		}
	}
}

// TestNATSWithOptionsOverridesListen: whatever host and port the options
// name, the server listens on a free loopback port with JetStream in the
// given store.
func TestNATSWithOptionsOverridesListen(t *testing.T) {
	dir := t.TempDir()
	srv := streamstest.NATSWithOptions(t, &server.Options{Host: "0.0.0.0", Port: 4222, StoreDir: dir})
	addr := srv.Addr().String()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":4222") {
		t.Fatalf("listens on %s, want a free port of 127.0.0.1", addr)
	}
	if got := srv.JetStreamConfig().StoreDir; !strings.HasPrefix(got, dir) {
		t.Fatalf("JetStream stores in %s, want under %s", got, dir)
	}
}

func TestLogBufferConcurrentLines(t *testing.T) {
	var b streamstest.LogBuffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				log.Warn("failing", "writer", w, "i", i)
				log.Info("fine")
			}
		})
	}
	first := b.WaitFor(t, 5*time.Second, regexp.MustCompile(`level=WARN`))
	if !strings.Contains(first, `msg=failing`) || strings.HasSuffix(first, "\n") {
		t.Fatalf("WaitFor returned %q, want a whole warning line without its end", first)
	}
	wg.Wait()
	if n := len(b.Lines(regexp.MustCompile(`level=WARN msg=failing writer=\d+ i=\d+$`))); n != 200 {
		t.Fatalf("%d whole warning lines, want 200 (lines torn by concurrent writers?):\n%s", n, b.String())
	}
	if n := len(b.Lines(regexp.MustCompile(`^$`))); n != 0 {
		t.Fatalf("%d empty lines, want none: the final line end starts no line", n)
	}
	b.Write([]byte("partial"))
	if got := b.Lines(regexp.MustCompile(`^partial$`)); len(got) != 1 {
		t.Fatalf("unfinished last line: %q, want it as a line", got)
	}
}

func TestLogBufferWaitForFails(t *testing.T) {
	var b streamstest.LogBuffer
	b.Write([]byte("level=INFO msg=fine\n"))
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() { // Fatalf ends the goroutine it runs on
		defer close(done)
		b.WaitFor(ft, 50*time.Millisecond, regexp.MustCompile(`level=ERROR`))
	}()
	<-done
	if !strings.Contains(ft.msg, "level=ERROR") || !strings.Contains(ft.msg, "msg=fine") {
		t.Fatalf("WaitFor failed with %q, want the pattern and what was written", ft.msg)
	}
}

// fatalRecorder records Fatalf instead of failing the real test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
