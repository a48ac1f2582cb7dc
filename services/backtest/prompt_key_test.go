package backtest

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestAssignPromptKeys(t *testing.T) {
	tr := synthetic(4, 3, time.Second, 10) // c0..c3, prompts growing a block a turn
	// c4 opens with c0's first prompt: the same words, so the same key.
	tr.Requests = append(tr.Requests, Request{ArrivalNs: 1e12, Conversation: "c4", Blocks: []uint64{0}},
		Request{ArrivalNs: 1e12 + 1, Conversation: "c5"})
	tr.AssignPromptKeys()
	byConv := map[string]string{}
	for i, r := range synthetic(4, 3, time.Second, 10).Requests {
		got := tr.Requests[i].Conversation
		if !strings.HasPrefix(got, "pk-") {
			t.Fatalf("request %d got key %q", i, got)
		}
		if k, ok := byConv[r.Conversation]; ok && k != got {
			t.Fatalf("conversation %s has keys %s and %s", r.Conversation, k, got)
		}
		byConv[r.Conversation] = got
	}
	if len(byConv) != 4 || byConv["c1"] == byConv["c0"] {
		t.Fatalf("keys %v: want one per conversation", byConv)
	}
	if got := tr.Requests[len(tr.Requests)-2].Conversation; got != byConv["c0"] {
		t.Fatalf("c4 opened like c0 but got %s, not %s", got, byConv["c0"])
	}
	if got := tr.Requests[len(tr.Requests)-1].Conversation; got != "c5" {
		t.Fatalf("a request without blocks got %q, want its own id c5", got)
	}
}

// TestPromptKeysKeepCacheHits: on conversations whose openings differ,
// routing by the prompt key partitions requests as the ids do, so the
// hash policy's cache hit ratio stays where the ids put it.
func TestPromptKeysKeepCacheHits(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	byID := run(t, f, synthetic(40, 4, 50*time.Millisecond, 20), func(c *Config) { c.Policies = []string{PolicyHash} })
	byPrompt := run(t, f, synthetic(40, 4, 50*time.Millisecond, 20), func(c *Config) {
		c.Policies, c.AffinityKey = []string{PolicyHash}, AffinityPrompt
	})
	a, b := byID.Policies[0].CacheHitRatio, byPrompt.Policies[0].CacheHitRatio
	if a == 0 || math.Abs(a-b) > 0.05 || byPrompt.Trace.Conversations != 40 {
		t.Fatalf("cache hit ratio %.3f by id, %.3f by prompt key (%d conversations): want equal within 0.05",
			a, b, byPrompt.Trace.Conversations)
	}
	bad := DefaultConfig()
	bad.Fleet, bad.AffinityKey = f, "session"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "affinity key") {
		t.Fatalf("affinity key %q: %v", bad.AffinityKey, err)
	}
}
