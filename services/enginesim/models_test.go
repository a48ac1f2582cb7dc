package enginesim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// TestEngineServesItsModels: in a fleet that lists models, an engine
// answers a model it does not serve 404 and a prompt over its context
// 400 (vLLM's answers), serves its own models with completion events
// that name them, and lists them on /v1/models.
func TestEngineServesItsModels(t *testing.T) {
	h := start(t, func(c *Config) {
		f, err := schemas.ParseFleet([]byte(strings.Replace(strings.Replace(testFleetYAML,
			"replicas: 2}", "replicas: 2, models: [llama, mistral], max_context_tokens: 64}", 1),
			"kv_cache_tokens: 100000}", "kv_cache_tokens: 100000, models: [llama]}", 1)))
		if err != nil {
			t.Fatal(err)
		}
		c.Fleet = f
	})
	body := chat(5, false, "user", "hello")
	body["model"] = "mistral"
	if code, b := h.post(t, chatPath("a100-b"), body, HeaderConversation, "c-1"); code != 404 || !strings.Contains(string(b), "The model `mistral` does not exist.") {
		t.Errorf("mistral on a100-b: %d %s", code, b)
	}
	if code, b := h.post(t, chatPath("h100-a"), chat(5, false, "user", strings.Repeat("long words ", 40)), HeaderConversation, "c-2"); code != 400 ||
		!strings.Contains(string(b), "maximum context length is 64 tokens") {
		t.Errorf("long prompt on h100-a: %d %s", code, b)
	}
	if code, b := h.post(t, chatPath("h100-a"), body, HeaderConversation, "c-3"); code != 200 {
		t.Fatalf("mistral on h100-a: %d %s", code, b)
	}
	if ev := h.completionOf(t, "c-3", 0); ev.Model != "mistral" {
		t.Errorf("completion event names model %q", ev.Model)
	}
	code, b := h.get(t, "/engines/h100-a/v1/models")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Data) != 2 || list.Data[0].ID != "llama" || list.Data[1].ID != "mistral" {
		t.Errorf("GET /v1/models: %d %s", code, b)
	}
}
