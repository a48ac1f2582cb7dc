package enginesim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testFleet has two engines with blocks of 16 tokens (64 bytes), so short
// test prompts span several blocks. h100-a's numbers are zero: they come
// from engine.DefaultParams("h100").
const testFleetYAML = `
block_tokens: 16
network_ms: {r1: {r1: 1}}
clusters: [{name: fe-a, region: r1, demand_share: 1}]
engines:
  - {name: h100-a, region: r1, sku: h100, prefill_tokens_per_s: 9282, decode_step_ms: {base: 28.91, per_seq: 0.3343}, max_batch: 64, kv_cache_tokens: 500000, replicas: 2}
  - {name: a100-b, region: r1, sku: a100, prefill_tokens_per_s: 3086, decode_step_ms: {base: 43.8, per_seq: 0.4095}, max_batch: 8, kv_cache_tokens: 100000}
`

func testFleet(t testing.TB) *schemas.Fleet {
	t.Helper()
	f, err := schemas.ParseFleet([]byte(testFleetYAML))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// testConfig runs 20 times faster than real time, listens on a free port
// and has no Kafka.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Fleet = testFleet(t)
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Kafka.Brokers = nil
	cfg.TimeScale = 20
	cfg.StatusInterval = 50 * time.Millisecond
	cfg.ChunkInterval = 10 * time.Millisecond
	cfg.Producer.CloseTimeout = 2 * time.Second
	cfg.Producer.DeliveryTimeout = time.Second
	return cfg
}

// harness is a running Sim with its events.
type harness struct {
	s      *Sim
	client *http.Client
	mu     sync.Mutex
	events []schemas.Event
}

// start runs a Sim until the test ends.
func start(t *testing.T, mut func(*Config)) *harness {
	t.Helper()
	h := &harness{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}}
	cfg := testConfig(t)
	cfg.OnEvent = h.record
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Ready()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		h.client.CloseIdleConnections()
	})
	return h
}

func (h *harness) record(ev schemas.Event) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
}

// waitEvent returns the first event matching ok, waiting up to 10 s.
func (h *harness) waitEvent(t *testing.T, ok func(*schemas.Event) bool) schemas.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		h.mu.Lock()
		for i := range h.events {
			if ok(&h.events[i]) {
				ev := h.events[i]
				h.mu.Unlock()
				return ev
			}
		}
		h.mu.Unlock()
	}
	t.Fatal("no matching event within 10 s")
	return schemas.Event{}
}

// completionOf waits for the completion event of conversation conv, the
// n-th one (from 0).
func (h *harness) completionOf(t *testing.T, conv string, n int) schemas.Completion {
	t.Helper()
	seen := 0
	return h.waitEvent(t, func(ev *schemas.Event) bool {
		if ev.Kind != schemas.KindCompletion || ev.Completion.ConversationID != conv {
			return false
		}
		seen++
		return seen > n
	}).Completion
}

// post sends a JSON body and returns the status and the body.
func (h *harness) post(t *testing.T, path string, body any, headers ...string) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+h.s.Addr()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return h.do(t, req)
}

func (h *harness) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+h.s.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h.do(t, req)
}

func (h *harness) do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// chat is a request body.
func chat(maxTokens int, stream bool, msgs ...string) map[string]any {
	var ms []map[string]string
	for i := 0; i+1 < len(msgs); i += 2 {
		ms = append(ms, map[string]string{"role": msgs[i], "content": msgs[i+1]})
	}
	body := map[string]any{"model": "llama", "messages": ms, "max_tokens": maxTokens}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	return body
}

// longSystem is a system prompt of several blocks.
var longSystem = strings.Repeat("You answer questions about GPU serving. ", 20)

func chatPath(engine string) string { return "/engines/" + engine + "/v1/chat/completions" }
