package adapter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// fakeEngine serves the fixtures in order (the last one from then on),
// or a 500 when failing is set.
type fakeEngine struct {
	bodies  [][]byte
	served  atomic.Int32
	failing atomic.Bool
}

func newFakeEngine(t *testing.T, files ...string) (*fakeEngine, *httptest.Server) {
	t.Helper()
	f := &fakeEngine{}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		f.bodies = append(f.bodies, b)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.failing.Load() || r.URL.Path != "/metrics" {
			http.Error(w, "engine dead", http.StatusInternalServerError)
			return
		}
		n := int(f.served.Add(1)) - 1
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(f.bodies[min(n, len(f.bodies)-1)])
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

type collected struct {
	mu     sync.Mutex
	events []schemas.Event
	synth  []bool
}

func (c *collected) add(ev schemas.Event, synthetic bool) {
	c.mu.Lock()
	c.events, c.synth = append(c.events, ev), append(c.synth, synthetic)
	c.mu.Unlock()
}

// wait returns the events once ok says enough have come, within 10 s.
func (c *collected) wait(t *testing.T, ok func([]schemas.Event, []bool) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		done := ok(c.events, c.synth)
		c.mu.Unlock()
		if done {
			return
		}
	}
	t.Fatal("events did not arrive within 10 s")
}

func runAdapter(t *testing.T, cfg Config) *Adapter {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return a
}

func countKind(evs []schemas.Event, kind schemas.EventKind, health schemas.Health) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && (kind != schemas.KindStatus || ev.Status.Health == health) {
			n++
		}
	}
	return n
}

func TestAdapterPublishesToKafka(t *testing.T) {
	addrs := streamstest.Kafka(t)
	fake, srv := newFakeEngine(t, "vllm-v1-a.prom", "vllm-v1-b.prom")
	var got collected
	cfg := DefaultConfig()
	cfg.Targets = []Target{{Engine: "east-h100-0", URL: srv.URL + "/metrics", Kind: KindVLLM}}
	cfg.Interval = 30 * time.Millisecond
	cfg.Kafka.Brokers = addrs
	cfg.Producer.CloseTimeout = 2 * time.Second
	cfg.OnEvent = got.add
	runAdapter(t, cfg)

	// Scrape a, then b: two healthy statuses and the 38 + 2 completions
	// of the interval, flagged synthetic.
	got.wait(t, func(evs []schemas.Event, synth []bool) bool {
		return countKind(evs, schemas.KindCompletion, 0) >= 40 && countKind(evs, schemas.KindStatus, schemas.HealthHealthy) >= 2
	})
	got.mu.Lock()
	for i, ev := range got.events {
		if (ev.Kind == schemas.KindCompletion) != got.synth[i] {
			t.Errorf("event %d: kind %d, synthetic %v", i, ev.Kind, got.synth[i])
		}
	}
	got.mu.Unlock()
	fake.failing.Store(true)
	got.wait(t, func(evs []schemas.Event, _ []bool) bool {
		for _, ev := range evs {
			if ev.Kind == schemas.KindStatus && ev.Status.Health == schemas.HealthUnhealthy {
				return ev.Status.ReadyReplicas == 0 && ev.Status.TotalReplicas == 2
			}
		}
		return false
	})
	// The same events are on Kafka, keyed by engine, completions flagged.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(schemas.TopicSignals),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	completions, unhealthy := 0, 0
	for (completions < 40 || unhealthy == 0) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var ev schemas.Event
			if err := schemas.DecodeEvent(r.Value, &ev); err != nil || ev.Validate() != nil || string(r.Key) != "east-h100-0" {
				t.Fatalf("record %d: key %q, %v", r.Offset, r.Key, err)
			}
			synthetic := false
			for _, h := range r.Headers {
				synthetic = synthetic || (h.Key == HeaderSynthetic && string(h.Value) == "metrics")
			}
			if (ev.Kind == schemas.KindCompletion) != synthetic {
				t.Fatalf("record %d: kind %d, synthetic header %v", r.Offset, ev.Kind, synthetic)
			}
			if ev.Kind == schemas.KindCompletion {
				completions++
			} else if ev.Status.Health == schemas.HealthUnhealthy {
				unhealthy++
			}
		})
	}
	if completions < 40 || unhealthy == 0 {
		t.Fatalf("on Kafka: %d completions, %d unhealthy statuses", completions, unhealthy)
	}
}

// A target that does not answer at all is unhealthy; the other target is
// unaffected.
func TestAdapterUnreachableTarget(t *testing.T) {
	_, srv := newFakeEngine(t, "sglang-a.prom")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	var got collected
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = nil
	cfg.Interval = 20 * time.Millisecond
	cfg.ScrapeTimeout = time.Second
	cfg.Targets = []Target{
		{Engine: "live", URL: srv.URL + "/metrics", Kind: KindSGLang},
		{Engine: "gone", URL: deadURL + "/metrics", Kind: KindVLLM},
	}
	cfg.OnEvent = got.add
	runAdapter(t, cfg)
	got.wait(t, func(evs []schemas.Event, _ []bool) bool {
		var live, gone bool
		for _, ev := range evs {
			live = live || ev.Status.Engine == "live" && ev.Status.Health == schemas.HealthHealthy && ev.Status.Running == 9
			gone = gone || ev.Status.Engine == "gone" && ev.Status.Health == schemas.HealthUnhealthy && ev.Status.TotalReplicas == 1
		}
		return live && gone
	})
}

func TestConfigValidate(t *testing.T) {
	good := Target{Engine: "e", URL: "http://h:8000/metrics", Kind: KindVLLM}
	for _, tc := range []struct {
		name    string
		targets []Target
		edit    func(*Config)
	}{
		{"no targets", nil, nil},
		{"bad url", []Target{{Engine: "e", URL: "h:8000", Kind: KindVLLM}}, nil},
		{"bad kind", []Target{{Engine: "e", URL: "http://h/metrics", Kind: "tgi"}}, nil},
		{"no engine", []Target{{URL: "http://h/metrics", Kind: KindVLLM}}, nil},
		{"twice", []Target{good, good}, nil},
		{"zero interval", []Target{good}, func(c *Config) { c.Interval = 0 }},
		{"bad topic", []Target{good}, func(c *Config) { c.Topic = "" }},
	} {
		cfg := DefaultConfig()
		cfg.Targets = tc.targets
		if tc.edit != nil {
			tc.edit(&cfg)
		}
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	cfg := DefaultConfig()
	cfg.Targets = []Target{good}
	if err := cfg.Validate(); err != nil {
		t.Errorf("good config: %v", err)
	}
}
