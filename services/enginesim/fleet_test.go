package enginesim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// engineList reads GET /engines.
func (h *harness) engineList(t *testing.T) map[string]EngineInfo {
	t.Helper()
	code, b := h.get(t, "/engines")
	if code != 200 {
		t.Fatalf("GET /engines: %d %s", code, b)
	}
	var l struct{ Engines []EngineInfo }
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]EngineInfo{}
	for _, e := range l.Engines {
		out[e.Name] = e
	}
	return out
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10 s", what)
		}
	}
}

// SetFleet: an engine added serves at once, a changed one takes its new
// parameters, a removed one keeps serving (its request in flight and new
// ones) until its drain is over and it is idle, then answers 404; one put
// back while it drains is kept.
func TestSetFleetAddChangeRemove(t *testing.T) {
	h := start(t, func(c *Config) { c.DrainTimeout = 300 * time.Millisecond })
	f := testFleet(t)
	next := *f
	added := f.Engines[0]
	added.Name = "h100-c"
	next.Engines = append(slices.Clone(f.Engines), added)
	next.Engines[0].Replicas = 1 // h100-a: 2 replicas before
	if err := h.s.SetFleet(&next); err != nil {
		t.Fatal(err)
	}
	if code, b := h.post(t, chatPath("h100-c"), chat(5, false, "user", "hi")); code != 200 {
		t.Fatalf("the added engine: %d %s", code, b)
	}
	waitUntil(t, "h100-a with 1 replica", func() bool { return h.engineList(t)["h100-a"].TotalReplicas == 1 })
	if code, b := h.post(t, chatPath("h100-a"), chat(5, false, "user", "hi")); code != 200 {
		t.Fatalf("the changed engine: %d %s", code, b)
	}

	// Remove a100-b with a request in flight (~0.45 s of wall time at 20x: past the drain time, within the second one).
	long := make(chan int, 1)
	go func() {
		code, _ := h.post(t, chatPath("a100-b"), chat(200, false, "user", "a long answer please"))
		long <- code
	}()
	waitUntil(t, "a100-b running the long request", func() bool { return h.engineList(t)["a100-b"].Running == 1 })
	without := next
	without.Engines = slices.DeleteFunc(slices.Clone(next.Engines), func(e schemas.FleetEngine) bool { return e.Name == "a100-b" })
	if err := h.s.SetFleet(&without); err != nil {
		t.Fatal(err)
	}
	if !h.engineList(t)["a100-b"].Draining {
		t.Fatal("a100-b not listed as draining")
	}
	if code, b := h.post(t, chatPath("a100-b"), chat(5, false, "user", "still here?")); code != 200 {
		t.Fatalf("a draining engine: %d %s", code, b)
	}
	if code := <-long; code != 200 {
		t.Fatalf("the request in flight at the removal: %d", code)
	}
	waitUntil(t, "a100-b forgotten", func() bool { _, ok := h.engineList(t)["a100-b"]; return !ok })
	if code, _ := h.post(t, chatPath("a100-b"), chat(5, false, "user", "hi")); code != 404 {
		t.Fatalf("a drained engine: %d, want 404", code)
	}
	if st := h.s.Stats(); st.Served != 4 || st.Failed+st.Shed != 0 {
		t.Fatalf("stats %+v, want 4 served (the drained engine's 2 included)", st)
	}
	if got := h.s.EngineNames(); !slices.Equal(got, []string{"h100-a", "h100-c"}) {
		t.Fatalf("engines %v", got)
	}

	// Removed and put back within the drain time: the same engine, serving.
	if err := h.s.SetFleet(f); err == nil {
		// f brings a100-b back (new) and removes h100-c (draining).
		if !h.engineList(t)["h100-c"].Draining {
			t.Fatal("h100-c not draining")
		}
	} else {
		t.Fatal(err)
	}
	if err := h.s.SetFleet(&next); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if e, ok := h.engineList(t)["h100-c"]; !ok || e.Draining || e.Served != 1 {
		t.Fatalf("h100-c put back while draining: %+v %v", e, ok)
	}
	if code, b := h.post(t, chatPath("a100-b"), chat(5, false, "user", "hi")); code != 200 {
		t.Fatalf("a100-b added again: %d %s", code, b)
	}
}

// A fleet that keeps none of the subset's engines is refused, changing
// nothing.
func TestSetFleetRefusesLosingTheSubset(t *testing.T) {
	h := start(t, func(c *Config) { c.Engines = []string{"a100-b"} })
	f := testFleet(t)
	f.Engines = f.Engines[:1]
	if err := h.s.SetFleet(f); err == nil {
		t.Fatal("no error")
	}
	if code, b := h.post(t, chatPath("a100-b"), chat(5, false, "user", "hi")); code != 200 {
		t.Fatalf("a100-b after a refused fleet: %d %s", code, b)
	}
}

// A changed entry while a request runs: the request finishes on the old
// model (200, its full output) and the engine reports the new
// parameters. A streamed request to an engine removed meanwhile streams
// to its end past the drain time.
func TestSetFleetChangeWithRequestsInFlight(t *testing.T) {
	h := start(t, func(c *Config) { c.DrainTimeout = 400 * time.Millisecond })
	f := testFleet(t)
	long := make(chan completion, 1)
	go func() {
		_, b := h.post(t, chatPath("a100-b"), chat(200, false, "user", "a long answer please"))
		long <- decodeCompletion(t, b)
	}()
	waitUntil(t, "a100-b running the long request", func() bool { return h.engineList(t)["a100-b"].Running == 1 })
	next := *f
	next.Engines = slices.Clone(f.Engines)
	next.Engines[1].Replicas = 3
	if err := h.s.SetFleet(&next); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a100-b with 3 replicas", func() bool { return h.engineList(t)["a100-b"].TotalReplicas == 3 })
	if e := h.engineList(t)["a100-b"]; e.Running != 1 {
		t.Fatalf("the request on the old model not counted as running: %+v", e)
	}
	if c := <-long; c.Usage.CompletionTokens != 200 {
		t.Fatalf("the request in flight at the change: %+v", c)
	}
	waitUntil(t, "the old model's request gone from the counts", func() bool { return h.engineList(t)["a100-b"].Running == 0 })

	streamed := make(chan string, 1)
	go func() {
		_, b := h.post(t, chatPath("h100-a"), chat(300, true, "user", "stream a long answer"))
		streamed <- string(b)
	}()
	waitUntil(t, "h100-a running the stream", func() bool { return h.engineList(t)["h100-a"].Running == 1 })
	without := next
	without.Engines = next.Engines[1:]
	if err := h.s.SetFleet(&without); err != nil {
		t.Fatal(err)
	}
	if b := <-streamed; !strings.HasSuffix(b, "data: [DONE]\n\n") || !strings.Contains(b, `"completion_tokens":300`) {
		t.Fatalf("the stream in flight at the removal ended: %.200q", b[max(0, len(b)-200):])
	}
	waitUntil(t, "h100-a forgotten", func() bool { _, ok := h.engineList(t)["h100-a"]; return !ok })
}
