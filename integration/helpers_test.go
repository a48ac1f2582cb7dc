package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// Shared helpers of the fault and security tests (fault_*_test.go,
// security_*_test.go). Everything here talks to real servers: services run
// their real Run in a goroutine, and stopping one cancels its context and
// waits until Run has returned, so a "killed" service is really gone.

// checkLeaks fails the test if it leaves goroutines behind. Call it first,
// so its cleanup runs after every other cleanup (brokers, services).
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// svc is one service's Run running in its own goroutine.
type svc struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
	once   sync.Once
}

// runSvc starts run in a goroutine; the test's cleanup stops it.
func runSvc(t testing.TB, name string, run func(context.Context) error) *svc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &svc{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = run(ctx)
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the service and waits for Run to return; an error other
// than the cancellation fails the test. Stopping twice does nothing.
func (s *svc) stop(t testing.TB) {
	t.Helper()
	s.once.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: Run did not return within 30 s of its context ending", s.name)
			return
		}
		if s.err != nil && !errors.Is(s.err, context.Canceled) {
			t.Errorf("%s: Run: %v", s.name, s.err)
		}
	})
}

// running reports whether Run has not returned yet.
func (s *svc) running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// waitUntil polls cond every 20 ms until it holds or d passes; then it
// fails the test, saying what it waited for.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond every 200 ms until it holds (true) or d passes
// (false), for conditions that are costly to check.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}

// logSink collects the services' logs. It is shown when the test fails,
// and the security tests search it for secrets.
type logSink = streamstest.LogBuffer

// newLogSink returns a sink and a logger writing to it at level; the
// logs are printed when t fails.
func newLogSink(t testing.TB, level slog.Level) (*logSink, *slog.Logger) {
	s := &logSink{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs:\n%s", s.String())
		}
	})
	return s, slog.New(slog.NewTextHandler(s, &slog.HandlerOptions{Level: level}))
}

// kafkaConfig is a plaintext client config for the test broker.
func kafkaConfig(brokers []string, id string) kafka.ClientConfig {
	c := kafka.DefaultClientConfig()
	c.Brokers, c.ClientID, c.DialTimeout = brokers, id, 2*time.Second
	return c
}

// natsConfig is a client config for the test server that reconnects fast
// and leaves a server that stops answering within about 3 s.
func natsConfig(url, name string) kv.Config {
	c := kv.DefaultConfig()
	c.URL, c.Name = url, name
	c.ConnectTimeout, c.ReconnectWait = 2*time.Second, 100*time.Millisecond
	c.PingInterval, c.MaxPingsOut = time.Second, 2
	c.RetryOnFailedConnect = true
	return c
}

// connectNATSKV connects with cfg; the connection closes with the test.
func connectNATSKV(t testing.TB, cfg kv.Config) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatalf("connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// parseFleet parses a fleet written in the test.
func parseFleet(t testing.TB, yaml string) *schemas.Fleet {
	t.Helper()
	f, err := schemas.ParseFleet([]byte(yaml))
	if err != nil {
		t.Fatalf("test fleet: %v", err)
	}
	return f
}

// engineLines writes n fleet engines named PREFIX-0.. in region, each
// with the given flow-style body (prefill, decode, batch, cache).
func engineLines(prefix, region string, n int, body string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: %s-%d, region: %s, %s}\n", prefix, i, region, body)
	}
	return b.String()
}

// meter is an OpenTelemetry meter provider whose metrics the test reads.
type meter struct {
	mp *sdkmetric.MeterProvider
	r  *sdkmetric.ManualReader
}

func newMeter(t testing.TB) *meter {
	r := sdkmetric.NewManualReader()
	m := &meter{mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), r: r}
	t.Cleanup(func() { _ = m.mp.Shutdown(context.Background()) })
	return m
}

// value sums the data points of the instrument named name whose
// attributes include every one of attrs (counters, up-down counters and
// gauges; a histogram gives its count).
func (m *meter) value(t testing.TB, name string, attrs ...attribute.KeyValue) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	total := 0.0
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name == name {
				total += sumPoints(mt.Data, attrs)
			}
		}
	}
	return total
}

func sumPoints(data metricdata.Aggregation, attrs []attribute.KeyValue) float64 {
	match := func(set attribute.Set) bool {
		for _, a := range attrs {
			if v, ok := set.Value(a.Key); !ok || v != a.Value {
				return false
			}
		}
		return true
	}
	total := 0.0
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				total += float64(p.Value)
			}
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				total += p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				total += float64(p.Value)
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				total += p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				total += float64(p.Count)
			}
		}
	}
	return total
}

// httpClient is a client whose idle connections close with the test.
func httpClient(t testing.TB, timeout time.Duration) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

// chatAnswer is the outcome of one chat completion through a data plane.
type chatAnswer struct {
	Code    int
	Engine  string // X-Ilb-Engine
	Latency time.Duration
	InBody  bool // the conversation was named in the body, not a header
}

// chat sends one small non-streaming chat completion for conv, naming
// the conversation and cluster in the X-Conversation-Id and X-Ilb-Cluster
// headers (the data plane then streams the body through unread).
func chat(ctx context.Context, c *http.Client, base, cluster, conv string, maxTokens int) (chatAnswer, error) {
	body := fmt.Sprintf(`{"model":"m","max_tokens":%d,"messages":[{"role":"user","content":"hello from %s"}]}`, maxTokens, conv)
	return postChat(ctx, c, base, body, map[string]string{"X-Conversation-Id": conv, "X-Ilb-Cluster": cluster})
}

// chatInBody is chat with the conversation in the body's user field and
// the cluster in its cluster field, no headers: the data plane reads and
// keeps the body, so it can retry the request on another engine.
func chatInBody(ctx context.Context, c *http.Client, base, cluster, conv string, maxTokens int) (chatAnswer, error) {
	body := fmt.Sprintf(`{"model":"m","max_tokens":%d,"user":%q,"cluster":%q,"messages":[{"role":"user","content":"hello from %s"}]}`,
		maxTokens, conv, cluster, conv)
	a, err := postChat(ctx, c, base, body, nil)
	a.InBody = true
	return a, err
}

func postChat(ctx context.Context, c *http.Client, base, body string, headers map[string]string) (chatAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return chatAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return chatAnswer{}, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return chatAnswer{Code: resp.StatusCode, Engine: resp.Header.Get("X-Ilb-Engine"), Latency: time.Since(start)}, err
}
