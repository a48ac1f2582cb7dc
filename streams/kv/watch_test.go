package kv_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// events records what a watch delivered, in order, with "DONE" where
// initialDone was called.
type events struct {
	mu  sync.Mutex
	log []string
	ch  chan struct{}
}

func newEvents() *events { return &events{ch: make(chan struct{}, 1000)} }

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
	e.ch <- struct{}{}
}

func (e *events) fn(en kv.Entry) error {
	e.add(en.Op.String() + ":" + en.Key + "=" + string(en.Value))
	return nil
}

func (e *events) done() { e.add("DONE") }

func (e *events) snapshot() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// waitLen waits until n events were recorded.
func (e *events) waitLen(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if got := e.snapshot(); len(got) >= n {
			return got
		}
		select {
		case <-e.ch:
		case <-deadline:
			t.Fatalf("waited for %d events, have %v", n, e.snapshot())
		}
	}
}

// startWatch runs Watch in a goroutine; the returned func cancels it and
// returns its error.
func startWatch(t *testing.T, b jetstream.KeyValue, keys string, ev *events, opts ...kv.WatchOption) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	res := make(chan error, 1)
	go func() { res <- kv.Watch(ctx, b, keys, ev.fn, ev.done, opts...) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-res:
			case <-time.After(10 * time.Second):
				t.Fatal("Watch did not return after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestWatchInitialThenDoneThenUpdates(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	ctx := ctxTimeout(t, 10*time.Second)
	b := bucket(t, js, 8)
	b.Put(ctx, "fe.a", []byte("a1"))
	b.Put(ctx, "fe.a", []byte("a2")) // only the latest is an initial value
	b.Put(ctx, "fe.b", []byte("b1"))
	b.Put(ctx, "other", []byte("x"))

	ev := newEvents()
	stop := startWatch(t, b, "fe.*", ev)
	got := ev.waitLen(t, 3)
	want := []string{"put:fe.a=a2", "put:fe.b=b1", "DONE"}
	if !slices.Equal(got, want) {
		t.Fatalf("initial delivery %v, want %v", got, want)
	}
	b.Put(ctx, "fe.b", []byte("b2"))
	b.Put(ctx, "other", []byte("y")) // not matched
	b.Delete(ctx, "fe.a")            // skipped by default
	b.Put(ctx, "fe.c", []byte("c1"))
	ev.waitLen(t, 5)
	want = append(want, "put:fe.b=b2", "put:fe.c=c1")
	if err := stop(); err != nil {
		t.Fatalf("Watch after cancel: %v", err)
	}
	if got = ev.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("delivery %v, want %v", got, want)
	}
}

// TestWatchRejectsPartialTokenWildcards: NATS wildcards match whole
// tokens; "fe-*" would silently match nothing (or, on some servers, end
// the initial values early), so Watch refuses it.
func TestWatchRejectsPartialTokenWildcards(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	b := bucket(t, js, 8)
	for _, keys := range []string{"fe-*", "a.b*", "a.>.b", "a>", "", "a..b"} {
		if err := kv.Watch(t.Context(), b, keys, func(kv.Entry) error { return nil }, nil); err == nil {
			t.Errorf("Watch accepted %q", keys)
		}
	}
}

func TestWatchEmptyBucketSignalsDone(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	b := bucket(t, js, 8)
	ev := newEvents()
	startWatch(t, b, ">", ev)
	if got := ev.waitLen(t, 1); !slices.Equal(got, []string{"DONE"}) {
		t.Fatalf("empty bucket: %v", got)
	}
}

func TestWatchIncludeDeletes(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	ctx := ctxTimeout(t, 10*time.Second)
	b := bucket(t, js, 8)
	ev := newEvents()
	startWatch(t, b, ">", ev, kv.IncludeDeletes())
	ev.waitLen(t, 1)
	// One operation at a time: a purge removes the key's earlier messages
	// from the stream, so a watcher that had not yet been sent the put
	// and the delete would never see them (JetStream, not the watcher).
	b.Put(ctx, "k", []byte("v"))
	ev.waitLen(t, 2)
	b.Delete(ctx, "k")
	ev.waitLen(t, 3)
	b.Purge(ctx, "k")
	got := ev.waitLen(t, 4)
	want := []string{"DONE", "put:k=v", "delete:k=", "purge:k="}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestWatchCallbackErrorEndsWatch(t *testing.T) {
	_, js := connect(t, streamstest.NATS(t))
	ctx := ctxTimeout(t, 10*time.Second)
	b := bucket(t, js, 8)
	b.Put(ctx, "k", []byte("v"))
	boom := errors.New("boom")
	err := kv.Watch(ctx, b, ">", func(kv.Entry) error { return boom }, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("Watch = %v, want the callback's error", err)
	}
	if err := kv.Watch(ctx, b, ">", nil, nil); err == nil {
		t.Fatal("Watch accepted a nil callback")
	}
	if err := kv.Watch(ctx, b, "bad key", func(kv.Entry) error { return nil }, nil); err == nil {
		t.Fatal("Watch accepted an invalid key pattern")
	}
}

func TestWatchEndsWhenConnectionClosed(t *testing.T) {
	nc, js := connect(t, streamstest.NATS(t))
	b := bucket(t, js, 8)
	res := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		res <- kv.Watch(t.Context(), b, ">", func(kv.Entry) error { return nil }, func() { close(started) },
			kv.RetryBackoff(10*time.Millisecond, 50*time.Millisecond))
	}()
	<-started
	nc.Close()
	select {
	case err := <-res:
		if !errors.Is(err, nats.ErrConnectionClosed) {
			t.Fatalf("Watch = %v, want ErrConnectionClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch kept running on a closed connection")
	}
}

// TestWatchSurvivesServerRestart: the server goes away and comes back
// (same port, same store); the watch re-delivers the current values
// (duplicates by revision) and then new updates; initialDone runs once.
func TestWatchSurvivesServerRestart(t *testing.T) {
	srv := streamstest.NewNATSServer(t, "")
	nc, js := connect(t, srv.URL())
	ctx := ctxTimeout(t, 20*time.Second)
	b := bucket(t, js, 8)
	b.Put(ctx, "fe-a", []byte("v1"))

	ev := newEvents()
	startWatch(t, b, ">", ev, kv.RewatchOnReconnect(nc), kv.RetryBackoff(20*time.Millisecond, 200*time.Millisecond))
	ev.waitLen(t, 2)
	srv.Restart()
	// Publish after the restart, retrying until the client is back.
	for {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := b.Put(short, "fe-a", []byte("v2"))
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("never reconnected: %v", err)
		}
	}
	deadline := time.After(15 * time.Second)
	for !slices.Contains(ev.snapshot(), "put:fe-a=v2") {
		select {
		case <-ev.ch:
		case <-deadline:
			t.Fatalf("update after restart not delivered: %v", ev.snapshot())
		}
	}
	dones := 0
	for _, s := range ev.snapshot() {
		if s == "DONE" {
			dones++
		}
		if s != "DONE" && s != "put:fe-a=v1" && s != "put:fe-a=v2" {
			t.Fatalf("unexpected event %q", s)
		}
	}
	if dones != 1 {
		t.Fatalf("initialDone called %d times, want 1: %v", dones, ev.snapshot())
	}
	if nc.Stats().Reconnects == 0 {
		t.Fatal("the client never reconnected: the restart was not exercised")
	}
}

func TestHeaderCarrierThroughNATS(t *testing.T) {
	nc, _ := connect(t, streamstest.NATS(t))
	sub, err := nc.SubscribeSync("sig")
	if err != nil {
		t.Fatal(err)
	}
	ctx, sc := spanCtx()
	msg := nats.NewMsg("sig")
	msg.Data = []byte("x")
	kv.InjectTrace(ctx, propagation.TraceContext{}, msg)
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := trace.SpanContextFromContext(kv.ExtractTrace(context.Background(), propagation.TraceContext{}, got))
	if out.TraceID() != sc.TraceID() || out.SpanID() != sc.SpanID() || !out.IsRemote() {
		t.Fatalf("extracted %v, want %v", out, sc)
	}
	if keys := (kv.HeaderCarrier(got.Header)).Keys(); !slices.Equal(keys, []string{"traceparent"}) {
		t.Fatalf("header keys %v", keys)
	}
}

func spanCtx() (context.Context, trace.SpanContext) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}
