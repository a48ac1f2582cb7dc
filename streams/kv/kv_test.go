package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	cfg := kv.DefaultConfig()
	cfg.URL = url
	cfg.ReconnectWait = 20 * time.Millisecond
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

func bucket(t *testing.T, js jetstream.JetStream, history uint8) jetstream.KeyValue {
	t.Helper()
	bc := kv.DefaultBucketConfig("ilb-weights")
	bc.History = history
	b, err := kv.EnsureBucket(ctxTimeout(t, 5*time.Second), js, bc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnsureBucketCreatesThenUpdates(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	ctx := ctxTimeout(t, 5*time.Second)
	b := bucket(t, js, 64)
	if _, err := kv.Put(ctx, b, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	b = bucket(t, js, 10) // existing bucket: updated, data kept
	st, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 10 {
		t.Fatalf("history after update = %d, want 10", st.History())
	}
	if e, err := kv.Get(ctx, b, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("value after update = %+v, %v", e, err)
	}
	bad := kv.DefaultBucketConfig("bad.name")
	if _, err := kv.EnsureBucket(ctx, js, bad); err == nil {
		t.Fatal("EnsureBucket accepted an invalid name")
	}
}

func TestPutCompareAndSwap(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	ctx := ctxTimeout(t, 5*time.Second)
	b := bucket(t, js, 64)

	r1, err := kv.Put(ctx, b, "fe-a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, b, "fe-a", []byte("again"), 0); !errors.Is(err, kv.ErrRevisionConflict) {
		t.Fatalf("create over an existing key: %v, want ErrRevisionConflict", err)
	}
	r2, err := kv.Put(ctx, b, "fe-a", []byte("v2"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("update at r%d: r%d, %v", r1, r2, err)
	}
	if _, err := kv.Put(ctx, b, "fe-a", []byte("stale"), r1); !errors.Is(err, kv.ErrRevisionConflict) {
		t.Fatalf("update at stale r%d: %v, want ErrRevisionConflict", r1, err)
	}
	if e, _ := kv.Get(ctx, b, "fe-a"); string(e.Value) != "v2" || e.Revision != r2 {
		t.Fatalf("after conflicts: %q r%d, want v2 r%d", e.Value, e.Revision, r2)
	}
}

// TestTwoWritersOneWins: two optimizers read the same revision and both
// try to publish; exactly one must win.
func TestTwoWritersOneWins(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	ctx := ctxTimeout(t, 10*time.Second)
	b := bucket(t, js, 64)
	for round := range 20 {
		cur, err := kv.Get(ctx, b, "manifest")
		base := cur.Revision
		if errors.Is(err, kv.ErrNotFound) {
			base = 0
		} else if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for w := range 2 {
			wg.Go(func() {
				<-start
				_, errs[w] = kv.Put(ctx, b, "manifest", fmt.Appendf(nil, "r%d-w%d", round, w), base)
			})
		}
		close(start)
		wg.Wait()
		wins, conflicts := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, kv.ErrRevisionConflict):
				conflicts++
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d wins %d conflicts, want 1 and 1", round, wins, conflicts)
		}
	}
}

func TestGetAndHistory(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	ctx := ctxTimeout(t, 5*time.Second)
	b := bucket(t, js, 3)
	if _, err := kv.Get(ctx, b, "nope"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	if _, err := kv.History(ctx, b, "nope"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("History missing: %v", err)
	}
	var rev uint64
	for i := 1; i <= 5; i++ {
		r, err := kv.Put(ctx, b, "fe-a", fmt.Appendf(nil, "v%d", i), rev)
		if err != nil {
			t.Fatal(err)
		}
		rev = r
	}
	hist, err := kv.History(ctx, b, "fe-a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range hist {
		got = append(got, string(e.Value))
		if e.Op != kv.OpPut || e.Key != "fe-a" || (i > 0 && e.Revision <= hist[i-1].Revision) {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if fmt.Sprint(got) != "[v3 v4 v5]" {
		t.Fatalf("history = %v, want the last 3 revisions oldest first", got)
	}
	if err := b.Delete(ctx, "fe-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, b, "fe-a"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("Get deleted: %v", err)
	}
	hist, _ = kv.History(ctx, b, "fe-a")
	if last := hist[len(hist)-1]; last.Op != kv.OpDelete || last.Op.String() != "delete" {
		t.Fatalf("last history entry after delete: %+v", last)
	}
	if _, err := kv.Put(ctx, b, "fe-a", []byte("back"), 0); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := kv.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*kv.Config){
		"no url":          func(c *kv.Config) { c.URL = " , " },
		"not a url":       func(c *kv.Config) { c.URL = "localhost" },
		"creds and nkey":  func(c *kv.Config) { c.CredsFile, c.NKeyFile = "a", "b" },
		"cert no key":     func(c *kv.Config) { c.TLSCertFile = "c.pem" },
		"no timeout":      func(c *kv.Config) { c.ConnectTimeout = 0 },
		"no wait":         func(c *kv.Config) { c.ReconnectWait = 0 },
		"negative buffer": func(c *kv.Config) { c.ReconnectBufBytes = -1 },
	}
	for name, mut := range cases {
		c := kv.DefaultConfig()
		mut(&c)
		if _, _, err := kv.Connect(t.Context(), c); err == nil {
			t.Errorf("%s: Connect accepted %+v", name, c)
		}
	}
	c := kv.DefaultConfig()
	c.URL = "nats://127.0.0.1:4222, nats://127.0.0.1:4223"
	if err := c.Validate(); err != nil {
		t.Errorf("two URLs: %v", err)
	}
	c.NKeyFile = t.TempDir() + "/missing.nk"
	if _, err := c.Options(); err == nil {
		t.Error("Options accepted a missing nkey file")
	}
}

func TestConnectRetryOnFailedConnect(t *testing.T) {
	n := streamstest.NewNATSServer(t, "")
	n.Stop()
	cfg := kv.DefaultConfig()
	cfg.URL = n.URL()
	if _, _, err := kv.Connect(t.Context(), cfg); err == nil {
		t.Fatal("Connect to a stopped server succeeded without RetryOnFailedConnect")
	}
	cfg.RetryOnFailedConnect = true
	cfg.ReconnectWait = 20 * time.Millisecond
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Connect with RetryOnFailedConnect: %v", err)
	}
	defer nc.Close()
	n.Restart()
	ctx := ctxTimeout(t, 10*time.Second)
	for {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := js.AccountInfo(short)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("never connected after the server came up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRedactURLs(t *testing.T) {
	got := kv.RedactURLs("nats://user:s3cret@h1:4222, nats://h2:4222,nats://tok@h3:4222")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "h2:4222") || !strings.Contains(got, "user:xxxxx@h1") {
		t.Fatalf("RedactURLs = %q", got)
	}
}
