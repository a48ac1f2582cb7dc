package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// simOutput is a bytes.Buffer safe to write from a running subcommand
// while the test reads it.
type simOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *simOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *simOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// background runs a long-running subcommand until the test ends and
// returns its stdout; the exit code is checked at the end.
func simBackground(t *testing.T, args ...string) *simOutput {
	t.Helper()
	out, errb := &simOutput{}, &simOutput{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runMain(ctx, args, out, errb) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("%s exited %d: %s", args[0], code, errb.String())
		}
	})
	return out
}

// waitFor returns the first submatch of re in the buffer, within 15 s.
func simWaitFor(t *testing.T, b *simOutput, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no %v in output %q", re, b.String())
	return ""
}

func TestEngineSimServesAndPublishes(t *testing.T) {
	addrs := streamstest.Kafka(t)
	out := simBackground(t, "engine-sim", "--kafka", addrs[0], "--http", "127.0.0.1:0",
		"--engines", "east-h100-0,eu-a100-0", "--time-scale", "20", "--status-interval", "50ms")
	base := simWaitFor(t, out, regexp.MustCompile(`east-h100-0\s+(http://\S+)`))
	if strings.Contains(out.String(), "west-a100-0") {
		t.Errorf("--engines ignored: %s", out.String())
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	// A model the example fleet's engines serve (they answer others 404).
	body := `{"model":"llama-2-70b","messages":[{"role":"user","content":"hello"}],"max_tokens":3}`
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("X-Conversation-Id", "cli-1")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Object string `json:"object"`
		Usage  struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil || c.Object != "chat.completion" || c.Usage.CompletionTokens != 3 {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, c, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(schemas.TopicSignals),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		found := false
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var ev schemas.Event
			if schemas.DecodeEvent(r.Value, &ev) == nil && ev.Kind == schemas.KindCompletion && ev.Completion.ConversationID == "cli-1" {
				found = ev.Completion.Engine == "east-h100-0" && ev.Completion.OutputTokens == 3
			}
		})
		if found {
			return
		}
	}
	t.Fatal("the completion event did not reach Kafka")
}

func TestEngineSimBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("engines: [{name: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"engine-sim", "--fleet", filepath.Join(dir, "missing.yaml")}, "--fleet"},
		{[]string{"engine-sim", "--fleet", bad}, "--fleet"},
		{[]string{"engine-sim", "--no-kafka", "--engines", "nope"}, "not in the fleet"},
		{[]string{"engine-sim", "--no-kafka", "--time-scale", "0"}, "time scale"},
		{[]string{"engine-sim", "--kafka", "nohost"}, "broker"},
		{[]string{"adapter", "--kafka", "127.0.0.1:1"}, "no --target"},
		{[]string{"adapter", "--target", "e=http://h/metrics", "--kind", "tgi"}, "--kind"},
		{[]string{"adapter", "--target", "e"}, "NAME=URL"},
		{[]string{"adapter", "--target", "e=ftp://h/metrics"}, "http(s)"},
		{[]string{"adapter", "--target", "e=tgi:http://h/metrics"}, "unknown engine kind"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
}

func TestParseAdapterTarget(t *testing.T) {
	for _, c := range []struct{ in, engine, url, kind string }{
		{"e1=http://10.0.0.1:8000/metrics", "e1", "http://10.0.0.1:8000/metrics", "vllm"},
		{"e2=sglang:http://h:30000/metrics", "e2", "http://h:30000/metrics", "sglang"},
		{"e3=https://h/metrics", "e3", "https://h/metrics", "vllm"},
	} {
		tg, err := parseAdapterTarget(c.in, "vllm")
		if err != nil || tg.Engine != c.engine || tg.URL != c.url || string(tg.Kind) != c.kind {
			t.Errorf("%q: %+v %v", c.in, tg, err)
		}
	}
}

// The adapter command scrapes a vLLM-shaped /metrics and its events reach
// Kafka.
func TestAdapterCommand(t *testing.T) {
	addrs := streamstest.Kafka(t)
	body, err := os.ReadFile(filepath.Join("..", "adapter", "testdata", "vllm-v1-a.prom"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	out := simBackground(t, "adapter", "--kafka", addrs[0], "--target", "east-h100-0="+srv.URL+"/metrics", "--interval", "50ms")
	simWaitFor(t, out, regexp.MustCompile(`scraping (east-h100-0)`))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(schemas.TopicSignals),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var st *schemas.EngineStatus
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var ev schemas.Event
			if schemas.DecodeEvent(r.Value, &ev) == nil && ev.Kind == schemas.KindStatus {
				st = &ev.Status
			}
		})
		if st != nil {
			if st.Engine != "east-h100-0" || st.Running != 12 || st.ReadyReplicas != 2 {
				t.Fatalf("status %+v", st)
			}
			return
		}
	}
	t.Fatal("no status event on Kafka")
}
