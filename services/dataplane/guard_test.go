package dataplane

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestBoundedLoadSpillHTTP: while eng-a holds its bounded load of
// streaming requests, new conversations of eng-a spill to eng-b; when
// eng-a drains, new conversations go to it again.
func TestBoundedLoadSpillHTTP(t *testing.T) {
	d, es, h := proxyFixture(t, nil, "eng-a", "eng-b")
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the engines' Close, which waits for their handlers
	es[0].gate = release
	keys := keysOn(t, d, "fe-a", "eng-a", 12)
	c, _ := d.cluster("fe-a")
	d.mu.Lock()
	cellA, cellB := c.cells["eng-a"], c.cells["eng-b"]
	d.mu.Unlock()
	var wg sync.WaitGroup
	served := make([]string, len(keys)-1)
	for i, k := range keys[:len(keys)-1] {
		before := c.inflight.Load()
		wg.Go(func() {
			req := chatRequestWith(k, true)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			served[i] = rec.Header().Get(HeaderEngine)
		})
		// Wait until this request is in flight on eng-a or done on eng-b.
		waitFor(t, 2*time.Second, "request "+strconv.Itoa(i)+" placed", func() bool {
			return c.inflight.Load() > before || cellB.picks.Load()+cellA.picks.Load() > int64(i)
		})
		waitFor(t, 2*time.Second, "request settled", func() bool {
			return cellB.inflight.Load() == 0
		})
	}
	// With share 0.5 and all in flight on eng-a, the bound ⌈1.25·0.5·(n+1)⌉
	// is reached at n = 2: two requests stay, the rest spill.
	if got := cellA.inflight.Load(); got != 2 {
		t.Fatalf("eng-a holds %d requests, want its bound of 2", got)
	}
	d.mu.Lock()
	engA, engB := d.reg.byName["eng-a"], d.reg.byName["eng-b"]
	d.mu.Unlock()
	if a, b := engA.live.own.Load(), engB.live.own.Load(); a != 2 || b != 0 {
		t.Fatalf("own requests in flight: eng-a %d, eng-b %d; want 2 and 0 (routing.Busy counts them live)", a, b)
	}
	unblock()
	wg.Wait()
	if a, b := engA.live.own.Load(), engB.live.own.Load(); a != 0 || b != 0 {
		t.Fatalf("own requests in flight after all ended: eng-a %d, eng-b %d; want 0", a, b)
	}
	a := 0
	for _, e := range served {
		if e == "eng-a" {
			a++
		}
	}
	if a != 2 {
		t.Fatalf("eng-a served %d of %d new conversations, want 2 (the rest spilled): %v", a, len(served), served)
	}
	if rec := chat(t, h, keys[len(keys)-1], nil); rec.Header().Get(HeaderEngine) != "eng-a" {
		t.Fatalf("after eng-a drained, a new conversation went to %s", rec.Header().Get(HeaderEngine))
	}
}

// TestSpanCarriesVersionAndEngine: one server span per routed request,
// with the snapshot version and the engine that served it.
func TestSpanCarriesVersionAndEngine(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())
	a := newEngine(t, "eng-a")
	cfg := testConfig("fe-a")
	cfg.EngineURLs = engineURLs(a)
	d := newDP(t, cfg, Deps{Tracer: tp})
	mustSet(t, d, snap("fe-a", 42, map[string]float64{"eng-a": 1}))
	if r := chat(t, d.Handler(), "u", nil); r.Code != 200 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range spans[0].Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if attrs["ilb.snapshot_version"].AsInt64() != 42 || attrs["ilb.engine"].AsString() != "eng-a" ||
		attrs["ilb.cluster"].AsString() != "fe-a" || attrs["http.response.status_code"].AsInt64() != 200 {
		t.Fatalf("span attributes %v", spans[0].Attributes())
	}
}

// TestHealthProbes: failing probes take an engine out, a passing probe
// brings it back.
func TestHealthProbes(t *testing.T) {
	d, es, _ := proxyFixtureDeps(t, Deps{Now: time.Now}, func(c *Config) {
		c.ProbeInterval = 20 * time.Millisecond
	}, "eng-a", "eng-b")
	runDP(t, d)
	es[1].code.Store(http.StatusServiceUnavailable)
	waitFor(t, 3*time.Second, "eng-b probed down", func() bool { return !available(d, "eng-b") })
	for i := range 100 {
		if got := pickName(t, d, "fe-a", "p"+strconv.Itoa(i)); got != "eng-a" {
			t.Fatalf("picked %s while its probes fail", got)
		}
	}
	es[1].code.Store(0)
	waitFor(t, 3*time.Second, "eng-b probed up", func() bool { return available(d, "eng-b") })
}
