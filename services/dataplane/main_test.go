package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/telemetry"
	"github.com/ilb-router/ilb/solver/sched"
)

func TestMain(m *testing.M) {
	if engine := os.Getenv(helperEngineEnv); engine != "" {
		os.Exit(runHelperPlane(engine)) // a data plane process for the proxy benchmarks
	}
	if stream := os.Getenv(helperStreamEnv); stream != "" {
		os.Exit(runHelperEngine(stream)) // an engine process for BenchmarkProxySplit
	}
	goleak.VerifyTestMain(m)
}

// t0 is the virtual "now" of tests that do not care about wall time.
var t0 = time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(t time.Time) *clock { return &clock{now: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testConfig is DefaultConfig with small memories and fast ticks.
func testConfig(clusters ...string) Config {
	cfg := DefaultConfig()
	cfg.Clusters = clusters
	cfg.ConversationSlots = 1 << 16
	cfg.TickInterval = 10 * time.Millisecond
	cfg.FilePollInterval = 20 * time.Millisecond
	return cfg
}

// newDP returns a DataPlane; without deps.Now its clock stands at t0,
// when the test snapshots are made.
func newDP(t testing.TB, cfg Config, deps Deps) *DataPlane {
	t.Helper()
	if deps.Now == nil {
		deps.Now = newClock(t0).Now
	}
	d, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runDP runs d until the test ends.
func runDP(t testing.TB, d *DataPlane) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func snap(cluster string, version uint64, weights map[string]float64) *schemas.Snapshot {
	return &schemas.Snapshot{Version: version, Cluster: cluster, CreatedAt: t0, Weights: weights}
}

func mustSet(t testing.TB, d *DataPlane, s *schemas.Snapshot) {
	t.Helper()
	if err := d.SetSnapshot(s); err != nil {
		t.Fatal(err)
	}
}

// withTable returns s carrying the given table.
func withTable(s *schemas.Snapshot, tb *sched.Table) *schemas.Snapshot {
	slots, engines, enc, data := tb.Encode()
	s.Table = &schemas.SnapshotTable{Slots: slots, Encoding: enc, Engines: engines, Data: data}
	return s
}

// pickName picks in process, as /v1/pick does.
func pickName(t testing.TB, d *DataPlane, cluster, key string) string {
	t.Helper()
	name, err := tryPick(d, cluster, key)
	if err != nil {
		t.Fatalf("pick %s/%s: %v", cluster, key, err)
	}
	return name
}

func tryPick(d *DataPlane, cluster, key string) (string, error) {
	c, ok := d.cluster(cluster)
	if !ok {
		return "", fmt.Errorf("no cluster %q", cluster)
	}
	p := c.cur.Load()
	ch, _, err := d.decide(c, p, sched.HashKey(key))
	if err != nil {
		return "", err
	}
	return p.slots[ch.idx].eng.name, nil
}

// picksOf picks n keys "conv-0".."conv-(n-1)".
func picksOf(t testing.TB, d *DataPlane, cluster string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = pickName(t, d, cluster, "conv-"+strconv.Itoa(i))
	}
	return out
}

func shares(picks []string) map[string]float64 {
	out := map[string]float64{}
	for _, p := range picks {
		out[p] += 1 / float64(len(picks))
	}
	return out
}

// withTelemetry returns deps whose metrics can be read with metricValue.
func withTelemetry(t testing.TB) (Deps, *telemetry.Telemetry) {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), telemetry.DefaultConfig("dataplane-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return Deps{Tracer: tel.Tracer, Meter: tel.Meter, Metrics: tel.MetricsHandler()}, tel
}

// metricValue sums the samples of name whose labels include want, from
// the Prometheus text served on /metrics.
func metricValue(t testing.TB, h http.Handler, name string, want map[string]string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sum := 0.0
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		labels, value := splitSample(line[len(name):])
		if matches(labels, want) {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("sample %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

func splitSample(s string) (labels, value string) {
	if strings.HasPrefix(s, "{") {
		end := strings.LastIndex(s, "}")
		return s[1:end], strings.TrimSpace(s[end+1:])
	}
	return "", strings.TrimSpace(s)
}

func matches(labels string, want map[string]string) bool {
	for k, v := range want {
		if !strings.Contains(labels, k+`="`+v+`"`) {
			return false
		}
	}
	return true
}

// engineStub is an OpenAI-like engine on an httptest server.
type engineStub struct {
	name   string
	srv    *httptest.Server
	code   atomic.Int32 // answer with this status when non-zero
	hits   atomic.Int64
	delay  atomic.Int64 // nanoseconds before answering
	gate   chan struct{}
	header atomic.Value // last request's headers
	body   atomic.Value // last request's body
	path   atomic.Value // last request's path
}

func newEngine(t testing.TB, name string) *engineStub {
	t.Helper()
	e := &engineStub{name: name}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *engineStub) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		if c := e.code.Load(); c != 0 {
			w.WriteHeader(int(c))
		}
		return
	}
	kind, ok := stubPaths[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	e.hits.Add(1)
	e.header.Store(r.Header.Clone())
	e.body.Store(body)
	e.path.Store(r.URL.Path)
	if d := e.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if c := e.code.Load(); c != 0 {
		http.Error(w, `{"error":{"message":"engine failure","type":"server_error","param":null,"code":"engine"}}`, int(c))
		return
	}
	if bytes.Contains(body, []byte(`"stream":true`)) {
		e.stream(w, kind)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch kind {
	case "completion":
		fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","created":1,"model":%q,"choices":[{"index":0,"text":"hi","finish_reason":"stop","logprobs":null}]}`, e.name)
	case "embedding":
		fmt.Fprintf(w, `{"object":"list","model":%q,"data":[{"object":"embedding","index":0,"embedding":[0.5,0.25]}],"usage":{"prompt_tokens":1,"total_tokens":1}}`, e.name)
	default:
		fmt.Fprintf(w, `{"id":"cmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`, e.name)
	}
}

// stubPaths are the OpenAI endpoints the stub engine serves.
var stubPaths = map[string]string{"/v1/chat/completions": "chat", "/v1/completions": "completion", "/v1/embeddings": "embedding"}

// stream answers with three SSE chunks and [DONE]; with a gate set, it
// waits on the gate before each chunk after the first.
func (e *engineStub) stream(w http.ResponseWriter, kind string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := range 3 {
		if i > 0 && e.gate != nil {
			<-e.gate
		}
		if kind == "completion" {
			fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"text\":\"tok%d\",\"finish_reason\":null}]}\n\n", e.name, i)
		} else {
			fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d\"}}]}\n\n", e.name, i)
		}
		fl.Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// engineURLs maps stub names to their URLs.
func engineURLs(es ...*engineStub) map[string]string {
	out := map[string]string{}
	for _, e := range es {
		out[e.name] = e.srv.URL
	}
	return out
}

// chat posts a chat completion to h as a client would.
func chat(t testing.TB, h http.Handler, user string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	body := fmt.Sprintf(`{"model":"m","user":%q,"messages":[{"role":"user","content":"hello"}]}`, user)
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// postJSON posts body to path on h.
func postJSON(h http.Handler, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeJSON[T any](t testing.TB, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("response %d %q: %v", rec.Code, rec.Body.String(), err)
	}
	return v
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// keysOn returns n keys whose table choice in d's cluster is engine.
func keysOn(t testing.TB, d *DataPlane, cluster, engine string, n int) []string {
	t.Helper()
	c, _ := d.cluster(cluster)
	p := c.cur.Load()
	var out []string
	for i := 0; len(out) < n; i++ {
		if i > 1_000_000 {
			t.Fatalf("no %d keys on %s", n, engine)
		}
		k := "key-" + strconv.Itoa(i)
		if p.slots[p.table.Pick(k)].eng.name == engine {
			out = append(out, k)
		}
	}
	return out
}

// getPath sends GET path to h.
func getPath(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// chatRequestWith builds a chat completion request for user.
func chatRequestWith(user string, stream bool) *http.Request {
	body := fmt.Sprintf(`{"model":"m","stream":%v,"user":%q,"messages":[]}`, stream, user)
	return httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
}

// unhealthy is a status that takes engine out.
func unhealthy(engine string) schemas.EngineStatus {
	return schemas.EngineStatus{Engine: engine, TimeUnixNano: 1, Health: schemas.HealthUnhealthy, ReadyReplicas: 1}
}
