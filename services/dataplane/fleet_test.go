package dataplane

import (
	"strconv"
	"testing"
	"time"
)

// An engine removed from the fleet drains: new conversations avoid it at
// once, ongoing ones keep it until DrainTimeout, then it is forgotten. An
// engine added is routed to once a snapshot weighs it; a snapshot naming
// an engine without a URL routes nothing to it.
func TestUpdateEnginesDrainAndAdd(t *testing.T) {
	clk := newClock(t0)
	cfg := testConfig("fe-a")
	cfg.EngineURLs = map[string]string{"eng-a": "http://a:8000", "eng-b": "http://b:8000"}
	cfg.DrainTimeout = time.Minute
	d := newDP(t, cfg, Deps{Now: clk.Now})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5}))
	onB := []string{}
	for i := range 200 {
		key := "conv-" + strconv.Itoa(i)
		if pickName(t, d, "fe-a", key) == "eng-b" {
			onB = append(onB, key)
		}
	}
	if len(onB) == 0 {
		t.Fatal("no conversation on eng-b")
	}

	d.UpdateEngines(map[string]string{"eng-a": "http://a:8000", "eng-c": "http://c:8000"}, nil)
	for _, key := range onB {
		if got := pickName(t, d, "fe-a", key); got != "eng-b" {
			t.Fatalf("ongoing conversation %s moved to %s while eng-b drains", key, got)
		}
	}
	for i := range 200 {
		if got := pickName(t, d, "fe-a", "new-"+strconv.Itoa(i)); got == "eng-b" {
			t.Fatalf("new conversation %d sent to the draining eng-b", i)
		}
	}
	clk.Advance(time.Minute)
	d.tick()
	for _, key := range onB {
		if got := pickName(t, d, "fe-a", key); got == "eng-b" {
			t.Fatalf("conversation %s still on eng-b after its drain time", key)
		}
	}

	// The optimizer's next snapshot: eng-c in, eng-b out; and one naming
	// eng-x, which this data plane has no URL for.
	mustSet(t, d, snap("fe-a", 2, map[string]float64{"eng-a": 0.5, "eng-c": 0.5}))
	if got := shares(picksOf(t, d, "fe-a", 1000)); got["eng-c"] < 0.4 {
		t.Fatalf("eng-c's share %v after it joined with weight 0.5", got)
	}
	mustSet(t, d, snap("fe-a", 3, map[string]float64{"eng-a": 0.5, "eng-x": 0.5}))
	if got := shares(picksOf(t, d, "fe-a", 1000)); got["eng-x"] != 0 || got["eng-a"] < 0.999 {
		t.Fatalf("a snapshot naming an engine without URL: shares %v, want all on eng-a", got)
	}
	// A fleet giving eng-x a URL makes it routable.
	d.UpdateEngines(map[string]string{"eng-a": "http://a:8000", "eng-x": "http://x:8000"}, nil)
	if got := shares(picksOf(t, d, "fe-a", 1000)); got["eng-x"] < 0.4 {
		t.Fatalf("eng-x's share %v once its URL is known", got)
	}
}
