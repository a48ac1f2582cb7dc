package enginesim

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
)

func statusOf(t *testing.T, h *harness, engine string, health schemas.Health) schemas.EngineStatus {
	t.Helper()
	return h.waitEvent(t, func(ev *schemas.Event) bool {
		return ev.Kind == schemas.KindStatus && ev.Status.Engine == engine && ev.Status.Health == health
	}).Status
}

func TestFaultUnhealthy(t *testing.T) {
	h := start(t, nil)
	code, body := h.post(t, "/engines/h100-a/fault", map[string]any{"healthy": false})
	var info EngineInfo
	if code != 200 || json.Unmarshal(body, &info) != nil || info.Healthy {
		t.Fatalf("fault: %d %s", code, body)
	}
	if code, body := h.post(t, chatPath("h100-a"), chat(4, false, "user", "x"), HeaderConversation, "u1"); code != 503 {
		t.Fatalf("chat while unhealthy: %d %s", code, body)
	}
	if code, _ := h.get(t, "/engines/h100-a/health"); code != 503 {
		t.Errorf("health while unhealthy: %d", code)
	}
	if ev := h.completionOf(t, "u1", 0); ev.Error != engine.ErrorUnhealthy || ev.OutputTokens != 0 {
		t.Errorf("completion event %+v", ev)
	}
	st := statusOf(t, h, "h100-a", schemas.HealthUnhealthy)
	if err := st.Validate(); err != nil {
		t.Fatal(err)
	}
	// The other engine is untouched.
	if code, _ := h.post(t, chatPath("a100-b"), chat(2, false, "user", "x")); code != 200 {
		t.Errorf("other engine: %d", code)
	}
	if code, _ := h.post(t, "/engines/h100-a/fault", map[string]any{"reset": true}); code != 200 {
		t.Fatal("reset failed")
	}
	if code, body := h.post(t, chatPath("h100-a"), chat(2, false, "user", "x")); code != 200 {
		t.Fatalf("chat after reset: %d %s", code, body)
	}
}

func TestFaultErrorRateOneFailsEveryRequest(t *testing.T) {
	h := start(t, nil)
	if err := h.s.InjectFault("a100-b", Fault{ErrorRate: new(1.0)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		code, body := h.post(t, chatPath("a100-b"), chat(4, false, "user", "x"), HeaderConversation, "e1")
		if code != 500 || !strings.Contains(string(body), "injected") {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if ev := h.completionOf(t, "e1", 2); ev.Error != engine.ErrorInjected {
		t.Errorf("completion event error %q", ev.Error)
	}
	if st := h.s.Stats(); st.Failed != 3 || st.Served != 0 {
		t.Errorf("stats %+v", st)
	}
}

// On an idle engine a request's TTFT is its prefill time, so a slowdown
// of 4 makes it exactly 4 times longer.
func TestFaultSlowdownStretchesTTFT(t *testing.T) {
	h := start(t, nil)
	prompt := strings.Repeat("a", 4000)
	ttft := func(conv string) float64 {
		if code, body := h.post(t, chatPath("a100-b"), chat(2, false, "user", conv+prompt), HeaderConversation, conv); code != 200 {
			t.Fatalf("%s: %d %s", conv, code, body)
		}
		return h.completionOf(t, conv, 0).TTFTMs
	}
	base := ttft("before")
	if err := h.s.InjectFault("a100-b", Fault{Slowdown: new(4.0)}); err != nil {
		t.Fatal(err)
	}
	slow := ttft("during")
	// "user: before" + 4000 bytes + "\n" is 4013 bytes, 1004 tokens,
	// uncached: one chunked step (a100's budget is 2048 tokens) of the
	// 43.8 ms decode base plus 1004 tokens at 3086 tokens/s, 369.1 ms,
	// 18.46 ms of wall time at TimeScale 20.
	if want := (43.8 + 1004.0/3086*1000) / 20; math.Abs(base-want) > 0.01 {
		t.Errorf("TTFT %.4f ms, want %.4f", base, want)
	}
	if r := slow / base; math.Abs(r-4) > 0.01 {
		t.Errorf("TTFT %.3f ms slowed to %.3f ms: ratio %.3f, want 4", base, slow, r)
	}
}

func TestFaultLosingReplicasThenRecovering(t *testing.T) {
	h := start(t, nil)
	if err := h.s.InjectFault("h100-a", Fault{ReadyReplicas: new(1)}); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, h, "h100-a", schemas.HealthDegraded); st.ReadyReplicas != 1 || st.TotalReplicas != 2 {
		t.Errorf("degraded status %+v", st)
	}
	code, _ := h.post(t, "/engines/h100-a/fault", map[string]any{"ready_replicas": 0, "duration": "300ms"})
	if code != 200 {
		t.Fatalf("fault: %d", code)
	}
	if code, body := h.post(t, chatPath("h100-a"), chat(2, false, "user", "x")); code != 503 || !strings.Contains(string(body), errNoReplica) {
		t.Fatalf("chat with no replica: %d %s", code, body)
	}
	if st := statusOf(t, h, "h100-a", schemas.HealthUnhealthy); st.ReadyReplicas != 0 {
		t.Errorf("status %+v", st)
	}
	// After 300 ms the fault reverts to the state before it: 1 of 2 ready.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := h.post(t, chatPath("h100-a"), chat(2, false, "user", "x"))
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d 5 s after a 300 ms fault", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := h.s.Engines()[0].ReadyReplicas; got != 1 {
		t.Errorf("ready replicas after the revert: %d, want 1", got)
	}
}

func TestFaultBeforeRunAndUnknownEngine(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPAddr = ""
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InjectFault("h100-a", Fault{Healthy: new(false)}); err != ErrNotRunning {
		t.Errorf("before Run: %v", err)
	}
	if err := s.InjectFault("nope", Fault{}); err == nil || !strings.Contains(err.Error(), "unknown engine") {
		t.Errorf("unknown engine: %v", err)
	}
	s.signals.close()
}
