package adapter

import (
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// statusesOf counts the status events of engine.
func statusesOf(c *collected, engine string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return statusCount(c.events, engine)
}

func statusCount(evs []schemas.Event, engine string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == schemas.KindStatus && ev.Status.Engine == engine {
			n++
		}
	}
	return n
}

// SetTargets while running: an added target is scraped, a removed one no
// longer is, a changed URL is scraped at its new address; bad targets
// change nothing.
func TestSetTargetsAddRemoveChange(t *testing.T) {
	_, vllm := newFakeEngine(t, "vllm-v1-a.prom")
	_, sglang := newFakeEngine(t, "sglang-a.prom")
	var got collected
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = nil
	cfg.Interval = 20 * time.Millisecond
	cfg.Targets = []Target{{Engine: "a", URL: vllm.URL + "/metrics", Kind: KindVLLM}}
	cfg.OnEvent = got.add
	a := runAdapter(t, cfg)
	got.wait(t, func(evs []schemas.Event, _ []bool) bool { return statusCount(evs, "a") > 0 })

	if err := a.SetTargets(nil); err == nil {
		t.Fatal("no targets accepted")
	}
	if err := a.SetTargets([]Target{{Engine: "a", URL: "ftp://x/metrics", Kind: KindVLLM}}); err == nil {
		t.Fatal("an ftp URL accepted")
	}
	if got := a.Targets(); len(got) != 1 || got[0] != cfg.Targets[0] {
		t.Fatalf("targets after refused changes: %+v", got)
	}

	b := Target{Engine: "b", URL: sglang.URL + "/metrics", Kind: KindSGLang}
	if err := a.SetTargets([]Target{cfg.Targets[0], b}); err != nil {
		t.Fatal(err)
	}
	got.wait(t, func(evs []schemas.Event, _ []bool) bool {
		for _, ev := range evs {
			if ev.Kind == schemas.KindStatus && ev.Status.Engine == "b" && ev.Status.Running == 9 {
				return true
			}
		}
		return false
	})

	// a removed: its statuses stop.
	if err := a.SetTargets([]Target{b}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a scrape in flight at the change may still report
	n := statusesOf(&got, "a")
	time.Sleep(200 * time.Millisecond)
	if after := statusesOf(&got, "a"); after != n {
		t.Fatalf("a still scraped after its removal: %d statuses, then %d", n, after)
	}
	if statusesOf(&got, "b") < 5 {
		t.Fatalf("b: %d statuses", statusesOf(&got, "b"))
	}

	// b's URL changes to the vLLM server (kind too): it reads 12 running.
	if err := a.SetTargets([]Target{{Engine: "b", URL: vllm.URL + "/metrics", Kind: KindVLLM}}); err != nil {
		t.Fatal(err)
	}
	got.wait(t, func(evs []schemas.Event, _ []bool) bool {
		for _, ev := range evs {
			if ev.Kind == schemas.KindStatus && ev.Status.Engine == "b" && ev.Status.Running == 12 {
				return true
			}
		}
		return false
	})
}
