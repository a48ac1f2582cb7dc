package dataplane

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// proxyFixture is a data plane for cluster fe-a in front of stub engines
// with equal weights.
func proxyFixture(t *testing.T, mut func(*Config), names ...string) (*DataPlane, []*engineStub, http.Handler) {
	t.Helper()
	return proxyFixtureDeps(t, Deps{}, mut, names...)
}

// proxyFixtureDeps is proxyFixture with deps; the snapshot is created at
// deps' now.
func proxyFixtureDeps(t *testing.T, deps Deps, mut func(*Config), names ...string) (*DataPlane, []*engineStub, http.Handler) {
	t.Helper()
	var es []*engineStub
	weights := map[string]float64{}
	for _, n := range names {
		es = append(es, newEngine(t, n))
		weights[n] = 1 / float64(len(names))
	}
	cfg := testConfig("fe-a")
	cfg.EngineURLs = engineURLs(es...)
	if mut != nil {
		mut(&cfg)
	}
	d := newDP(t, cfg, deps)
	s := snap("fe-a", 7, weights)
	s.CreatedAt = d.now()
	mustSet(t, d, s)
	return d, es, d.Handler()
}

func TestChatProxiedToPickedEngine(t *testing.T) {
	d, es, h := proxyFixture(t, nil, "eng-a", "eng-b")
	for i := range 40 {
		user := "user-" + strconv.Itoa(i)
		rec := chat(t, h, user, nil)
		want := pickName(t, d, "fe-a", user)
		if rec.Code != 200 || rec.Header().Get(HeaderEngine) != want || rec.Header().Get(HeaderVersion) != "7" {
			t.Fatalf("%s: %d engine %q version %q, want 200 from %s at version 7: %s", user, rec.Code,
				rec.Header().Get(HeaderEngine), rec.Header().Get(HeaderVersion), want, rec.Body)
		}
		if !strings.Contains(rec.Body.String(), `"model":"`+want+`"`) {
			t.Fatalf("body from the wrong engine: %s", rec.Body)
		}
	}
	if es[0].hits.Load() == 0 || es[1].hits.Load() == 0 {
		t.Fatalf("hits %d/%d: both engines should serve some of 40 users", es[0].hits.Load(), es[1].hits.Load())
	}
	// The conversation header wins over the user field, and the body
	// reaches the engine unchanged.
	rec := chat(t, h, "someone", map[string]string{HeaderConversation: "conv-x"})
	if want := pickName(t, d, "fe-a", "conv-x"); rec.Header().Get(HeaderEngine) != want {
		t.Fatalf("header key: engine %s, want %s", rec.Header().Get(HeaderEngine), want)
	}
	for _, e := range es {
		if b, _ := e.body.Load().([]byte); e.name == rec.Header().Get(HeaderEngine) && !strings.Contains(string(b), `"user":"someone"`) {
			t.Fatalf("engine got body %q", b)
		}
	}
}

// TestSSEPassesThroughChunkByChunk: the client reads each event before
// the engine has written the next one.
func TestSSEPassesThroughChunkByChunk(t *testing.T) {
	d, es, _ := proxyFixture(t, nil, "eng-a")
	es[0].gate = make(chan struct{})
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	body := `{"model":"m","stream":true,"user":"u1","messages":[]}`
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !strings.Contains(line, "tok"+strconv.Itoa(i)) {
			t.Fatalf("event %d = %q", i, line)
		}
		_, _ = r.ReadString('\n') // blank line ending the event
		if i < 2 {
			es[0].gate <- struct{}{} // the engine writes the next event only now
		}
	}
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("stream end %q", rest)
	}
}

func TestHTTPErrors(t *testing.T) {
	_, _, h := proxyFixture(t, func(c *Config) { c.MaxBodyBytes = 256 }, "eng-a")
	big := `{"user":"u","messages":[{"content":"` + strings.Repeat("x", 300) + `"}]}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		code                     int
		msg                      string
	}{
		{"body too large", "POST", "/v1/chat/completions", big, nil, 413, "over 256 bytes"},
		{"body too large, streamed", "POST", "/v1/chat/completions", big, map[string]string{HeaderConversation: "c"}, 413, "over 256 bytes"},
		{"not JSON", "POST", "/v1/chat/completions", `{"user":`, nil, 400, "not a JSON"},
		{"wrong method", "GET", "/v1/chat/completions", "", nil, 405, "use POST"},
		{"unknown cluster", "POST", "/v1/chat/completions", `{"user":"u","cluster":"fe-z"}`, nil, 404, `unknown cluster "fe-z"`},
		{"pick without conversation", "POST", "/v1/pick", `{"cluster":"fe-a"}`, nil, 400, `missing "conversation_id"`},
		{"pick not JSON", "POST", "/v1/pick", `nope`, nil, 400, "not a JSON object"},
		{"pick too large", "POST", "/v1/pick", big, nil, 413, "over 256 bytes"},
		{"pick wrong method", "GET", "/v1/pick", "", nil, 405, "use POST"},
		{"routing wrong method", "POST", "/v1/routing", "", nil, 405, "use GET"},
		{"routing unknown cluster", "GET", "/v1/routing?cluster=nope", "", nil, 404, "unknown cluster"},
		{"no such endpoint", "GET", "/v2/x", "", nil, 404, "no such endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.name == "body too large, streamed" {
				req.ContentLength = -1 // unknown length: the limit trips while streaming
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			msg := decodeJSON[errorBody](t, rec).Error.Message
			if rec.Code != tc.code || !strings.Contains(msg, tc.msg) ||
				rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s: %d %q, want %d containing %q", tc.method, tc.path, rec.Code, rec.Body, tc.code, tc.msg)
			}
		})
	}
}

// TestRetryGoesToNextChoice: a 5xx from the picked engine is retried on
// the conversation's next choice, which is the one skipping it gives.
func TestRetryGoesToNextChoice(t *testing.T) {
	d, es, h := proxyFixture(t, nil, "eng-a", "eng-b", "eng-c")
	es[0].code.Store(500)
	keys := keysOn(t, d, "fe-a", "eng-a", 5)
	for _, k := range keys {
		rec := chat(t, h, k, nil)
		if rec.Code != 200 || rec.Header().Get(HeaderEngine) == "eng-a" {
			t.Fatalf("%s: %d from %s, want 200 from another engine", k, rec.Code, rec.Header().Get(HeaderEngine))
		}
	}
	c, _ := d.cluster("fe-a")
	if got := c.budget.w.b.Load(); got != int64(len(keys)) {
		t.Fatalf("retries granted %d, want %d", got, len(keys))
	}
}

// TestRetryBudgetHoldsUnderFailureStorm: every engine answers 500; the
// retries sent stay within Finagle's budget, ratio 20% of the requests
// plus MinPerSecond × Window.
func TestRetryBudgetHoldsUnderFailureStorm(t *testing.T) {
	deps, tel := withTelemetry(t)
	d, es := allFailing(t, deps)
	h := d.Handler()
	const requests = 400
	for i := range requests {
		if rec := chat(t, h, "storm-"+strconv.Itoa(i), nil); rec.Code != 500 {
			t.Fatalf("request %d: %d, want the engine's 500 passed through", i, rec.Code)
		}
	}
	sent := int64(0)
	for _, e := range es {
		sent += e.hits.Load()
	}
	retries := sent - requests
	limit := int64(0.2*requests) + 10
	if retries > limit || retries < limit-1 {
		t.Fatalf("storm of %d requests made %d retries, want the budget's %d", requests, retries, limit)
	}
	m := tel.MetricsHandler()
	if got := metricValue(t, m, metricRetries, map[string]string{"cluster": "fe-a"}); got != float64(retries) {
		t.Fatalf("%s = %v, engines saw %d retries", metricRetries, got, retries)
	}
	if got := metricValue(t, m, metricRetryDenied, map[string]string{"cluster": "fe-a"}); got < requests-float64(limit) {
		t.Fatalf("%s = %v, want at least %v", metricRetryDenied, got, requests-float64(limit))
	}
	if got := metricValue(t, m, metricRequests, map[string]string{"cluster": "fe-a", "code": "500"}); got != requests {
		t.Fatalf("%s{code=500} = %v, want %d", metricRequests, got, requests)
	}
}

// TestClientSideThrottling: engines that keep answering 503 make the data
// plane reject locally with the SRE probability, so fewer requests reach
// them.
func TestClientSideThrottling(t *testing.T) {
	_, es, h := proxyFixture(t, func(c *Config) { c.MaxRetries = 0 }, "eng-a")
	es[0].code.Store(503)
	const n = 300
	local := 0
	for i := range n {
		rec := chat(t, h, "u-"+strconv.Itoa(i), nil)
		if rec.Code == 503 && strings.Contains(rec.Body.String(), "throttled locally") {
			local++
			if rec.Header().Get("Retry-After") == "" {
				t.Fatal("throttled answer without Retry-After")
			}
		}
	}
	// With no accepts, p = requests/(requests+1): nearly every request
	// after the first few is rejected locally.
	if local < n*9/10 || es[0].hits.Load() > n/10 {
		t.Fatalf("locally rejected %d of %d, engine hit %d times", local, n, es[0].hits.Load())
	}
}

func TestTraceContextReachesEngine(t *testing.T) {
	d, es, _ := proxyFixture(t, nil, "eng-a")
	deps, _ := withTelemetry(t)
	d2 := newDP(t, d.cfg, Deps{Tracer: deps.Tracer, Propagator: propagation.TraceContext{}})
	mustSet(t, d2, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	parent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rec := chat(t, d2.Handler(), "u", map[string]string{"traceparent": parent})
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	hdr := es[0].header.Load().(http.Header)
	got := hdr.Get("traceparent")
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(hdr)))
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || strings.Contains(got, "00f067aa0ba902b7") {
		t.Fatalf("engine got traceparent %q: want the client's trace with the data plane's span as parent", got)
	}
}

func TestMultiClusterRouting(t *testing.T) {
	a, b := newEngine(t, "eng-a"), newEngine(t, "eng-b")
	cfg := testConfig("fe-a", "fe-b")
	cfg.EngineURLs = engineURLs(a, b)
	d := newDP(t, cfg, Deps{})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	mustSet(t, d, snap("fe-b", 2, map[string]float64{"eng-b": 1}))
	h := d.Handler()
	if rec := chat(t, h, "u", map[string]string{HeaderCluster: "fe-b"}); rec.Header().Get(HeaderEngine) != "eng-b" {
		t.Fatalf("cluster header: %d %s", rec.Code, rec.Header().Get(HeaderEngine))
	}
	req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"user":"u","cluster":"fe-a"}`))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Header().Get(HeaderEngine) != "eng-a" {
		t.Fatalf("cluster field: %d %s", rec.Code, rec.Body)
	}
	if rec := chat(t, h, "u", nil); rec.Code != 400 || !strings.Contains(rec.Body.String(), "X-Ilb-Cluster") {
		t.Fatalf("no cluster with two served: %d %s", rec.Code, rec.Body)
	}
	pick := decodeJSON[pickResponse](t, postJSON(h, "/v1/pick", `{"cluster":"fe-b","conversation_id":"c"}`))
	if pick.Engine != "eng-b" || pick.SnapshotVersion != 2 {
		t.Fatalf("pick = %+v", pick)
	}
	all := decodeJSON[struct {
		Clusters map[string]routingInfo `json:"clusters"`
	}](t, getPath(h, "/v1/routing"))
	if len(all.Clusters) != 2 || all.Clusters["fe-a"].Version != 1 || all.Clusters["fe-b"].Weights["eng-b"] != 1 {
		t.Fatalf("routing of all clusters = %+v", all)
	}
}

func TestHealthz(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	h := d.Handler()
	if rec := getPath(h, "/healthz"); rec.Code != 503 || !strings.Contains(rec.Body.String(), `"snapshot:fe-a","ready":false`) {
		t.Fatalf("healthz before a snapshot: %d %s", rec.Code, rec.Body)
	}
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	if rec := getPath(h, "/healthz"); rec.Code != 200 {
		t.Fatalf("healthz with a snapshot: %d %s", rec.Code, rec.Body)
	}
}

func TestMetricNamesAreTheContract(t *testing.T) {
	deps, tel := withTelemetry(t)
	a := newEngine(t, "eng-a")
	cfg := testConfig("fe-a")
	cfg.EngineURLs = engineURLs(a)
	d := newDP(t, cfg, deps)
	_ = d.SetSnapshotJSON([]byte("bad"))
	s := snap("fe-a", 4, map[string]float64{"eng-a": 1})
	s.CreatedAt = t0.Add(-2 * time.Second)
	mustSet(t, d, s)
	chat(t, d.Handler(), "u", nil)
	rec := getPath(d.Handler(), "/metrics")
	for _, name := range []string{
		`ilb_dataplane_picks_total{cluster="fe-a",engine="eng-a"} 1`,
		`ilb_dataplane_fallbacks_total{cluster="fe-a",reason="spill"} 0`,
		`ilb_dataplane_snapshots_rejected_total{cluster="unknown",reason="malformed"} 1`,
		`ilb_dataplane_snapshot_version{cluster="fe-a"} 4`,
		`ilb_dataplane_snapshot_age_seconds{cluster="fe-a"} 2`,
		`ilb_dataplane_retries_total{cluster="fe-a"} 0`,
		`ilb_dataplane_retries_denied_total{cluster="fe-a"} 0`,
		`ilb_dataplane_shed_total{cluster="fe-a"} 0`,
		`ilb_dataplane_publish_to_swap_seconds_count 1`,
		`ilb_dataplane_publish_to_swap_seconds_sum 2`,
		`ilb_dataplane_requests_total{cluster="fe-a",code="200"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(rec.Body.String(), "ilb_"))
	}
	_ = tel.Registry
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestEngineWithoutURLIsUnavailable(t *testing.T) {
	a := newEngine(t, "eng-a")
	cfg := testConfig("fe-a")
	cfg.EngineURLs = engineURLs(a)
	d := newDP(t, cfg, Deps{})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-x": 0.5}))
	for i := range 50 {
		if got := pickName(t, d, "fe-a", "k"+strconv.Itoa(i)); got != "eng-a" {
			t.Fatalf("picked %s, which has no URL", got)
		}
	}
	info := decodeJSON[routingInfo](t, getPath(d.Handler(), "/v1/routing?cluster=fe-a"))
	if len(info.Engines) != 2 || info.Engines[1].Available || info.Engines[1].Reason != reasonUnhealthy.String() {
		t.Fatalf("routing engines = %+v", info.Engines)
	}
}

// FuzzChatRequest: any body and key header get a JSON answer with a known
// status, never a panic.
func FuzzChatRequest(f *testing.F) {
	f.Add([]byte(`{"user":"u","messages":[]}`), "")
	f.Add([]byte(`{"user":"u","cluster":"fe-a","stream":true}`), "conv")
	f.Add([]byte(`{"user":`), "")
	f.Add([]byte(`null`), "")
	f.Add([]byte(`{"cluster":"nope"}`), "")
	d := newDP(f, testConfig("fe-a"), Deps{}) // no engine URLs: nothing leaves the process
	mustSet(f, d, snap("fe-a", 1, threeWeights))
	h := d.Handler()
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body)))
		if key != "" && !strings.ContainsAny(key, "\r\n\x00") {
			req.Header.Set(HeaderConversation, key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 400, 404, 413, 502, 503:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		decodeJSON[errorBody](t, rec)
	})
}

// allFailing is a data plane for fe-a over three engines that all answer
// 500, with a retry budget reserve of 1/s × 10 s = 10 retries.
func allFailing(t *testing.T, deps Deps) (*DataPlane, []*engineStub) {
	t.Helper()
	var es []*engineStub
	for _, n := range []string{"eng-a", "eng-b", "eng-c"} {
		e := newEngine(t, n)
		e.code.Store(500)
		es = append(es, e)
	}
	cfg := testConfig("fe-a")
	cfg.EngineURLs = engineURLs(es...)
	cfg.Retry.MinPerSecond = 1
	d := newDP(t, cfg, deps)
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.4, "eng-b": 0.3, "eng-c": 0.3}))
	return d, es
}
