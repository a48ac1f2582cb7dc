package enginesim

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// completion is the response body, as an OpenAI client reads it.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func decodeCompletion(t *testing.T, b []byte) completion {
	t.Helper()
	var c completion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("response %q: %v", b, err)
	}
	return c
}

func TestChatCompletionIsOpenAIShaped(t *testing.T) {
	h := start(t, nil)
	code, body := h.post(t, chatPath("h100-a"), chat(20, false, "system", "Be brief.", "user", "Hi there"),
		HeaderConversation, "conv-1", HeaderCluster, "fe-a")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	c := decodeCompletion(t, body)
	// "system: Be brief.\n" (18) + "user: Hi there\n" (15) = 33 bytes = 9 tokens.
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-h100-a-") || c.Model != "llama" {
		t.Errorf("id %q object %q model %q", c.ID, c.Object, c.Model)
	}
	if len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Choices[0].FinishReason != "length" {
		t.Fatalf("choices %+v", c.Choices)
	}
	if got := len(c.Choices[0].Message.Content); got != 20*BytesPerToken {
		t.Errorf("content is %d bytes, want %d", got, 20*BytesPerToken)
	}
	u := c.Usage
	if u.PromptTokens != 9 || u.CompletionTokens != 20 || u.TotalTokens != 29 || u.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("usage %+v, want 9 prompt, 20 completion, 29 total, 0 cached", u)
	}
	ev := h.completionOf(t, "conv-1", 0)
	if err := (&schemas.Event{Kind: schemas.KindCompletion, Completion: ev}).Validate(); err != nil {
		t.Fatal(err)
	}
	if ev.Engine != "h100-a" || ev.Cluster != "fe-a" || ev.PromptTokens != 9 || ev.OutputTokens != 20 || ev.Error != "" {
		t.Errorf("completion event %+v", ev)
	}
	// At h100 speed: 9 tokens prefill in ~1 ms, 19 decode steps of ~29 ms;
	// reported in wall time at TimeScale 20.
	if ev.TTFTMs <= 0 || ev.TTFTMs > 5 || math.Abs(ev.TBOTMs-(28.91+0.3343)/20) > 0.01 {
		t.Errorf("TTFT %.3f ms, TBOT %.4f ms; want (0, 5] and %.4f", ev.TTFTMs, ev.TBOTMs, (28.91+0.3343)/20)
	}
}

func TestFollowUpTurnHitsThePrefixCache(t *testing.T) {
	h := start(t, nil)
	turn1 := chat(8, false, "system", longSystem, "user", "What is continuous batching?")
	code, body := h.post(t, chatPath("h100-a"), turn1, HeaderConversation, "c1")
	if code != 200 {
		t.Fatalf("turn 1: %d %s", code, body)
	}
	first := decodeCompletion(t, body)
	if first.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("turn 1 found %d cached tokens in an empty cache", first.Usage.PromptTokensDetails.CachedTokens)
	}
	answer := first.Choices[0].Message.Content
	turn2 := chat(8, false, "system", longSystem, "user", "What is continuous batching?",
		"assistant", answer, "user", "And prefix caching?")
	code, body = h.post(t, chatPath("h100-a"), turn2, HeaderConversation, "c1")
	if code != 200 {
		t.Fatalf("turn 2: %d %s", code, body)
	}
	second := decodeCompletion(t, body)
	// Turn 1's prompt is 8+800+1 + 6+28+1 = 844 bytes: its first 843 make
	// 13 blocks of 64 bytes = 208 tokens, all cached for turn 2.
	if got := second.Usage.PromptTokensDetails.CachedTokens; got != 13*16 {
		t.Fatalf("turn 2 cached %d tokens, want %d", got, 13*16)
	}
	// The other engine never saw the conversation.
	code, body = h.post(t, chatPath("a100-b"), turn2, HeaderConversation, "c2")
	if c := decodeCompletion(t, body); code != 200 || c.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("other engine: %d, cached %d", code, c.Usage.PromptTokensDetails.CachedTokens)
	}
	ev2 := h.completionOf(t, "c1", 1)
	if ev2.CachedPromptTokens != 208 {
		t.Errorf("turn 2 event: cached %d", ev2.CachedPromptTokens)
	}
}

func TestBadRequests(t *testing.T) {
	h := start(t, func(c *Config) { c.MaxBodyBytes = 1 << 10 })
	for _, tc := range []struct {
		name, path string
		body       any
		want       int
	}{
		{"unknown engine", chatPath("nope"), chat(1, false, "user", "x"), 404},
		{"not JSON", chatPath("h100-a"), "just a string", 400},
		{"no messages", chatPath("h100-a"), map[string]any{"messages": []any{}}, 400},
		{"no role", chatPath("h100-a"), map[string]any{"messages": []any{map[string]string{"content": "x"}}}, 400},
		{"zero max_tokens", chatPath("h100-a"), chat(0, false, "user", "x"), 400},
		{"bad content", chatPath("h100-a"), map[string]any{"messages": []any{map[string]any{"role": "user", "content": 7}}}, 400},
		{"too large", chatPath("h100-a"), chat(1, false, "user", strings.Repeat("x", 2<<10)), 413},
		{"fault unknown field", "/engines/h100-a/fault", map[string]any{"slow": 2}, 400},
		{"fault bad rate", "/engines/h100-a/fault", map[string]any{"error_rate": 1.5}, 400},
		{"fault too many replicas", "/engines/h100-a/fault", map[string]any{"ready_replicas": 3}, 400},
		{"fault bad duration", "/engines/h100-a/fault", map[string]any{"duration": "soon"}, 400},
		{"fault unknown engine", "/engines/nope/fault", map[string]any{"healthy": false}, 404},
	} {
		code, body := h.post(t, tc.path, tc.body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if code != tc.want || json.Unmarshal(body, &e) != nil || e.Error.Code != tc.want || e.Error.Message == "" {
			t.Errorf("%s: status %d body %s, want %d with an OpenAI error body", tc.name, code, body, tc.want)
		}
	}
}

func TestListAndHealth(t *testing.T) {
	h := start(t, nil)
	code, body := h.get(t, "/engines")
	var list struct {
		Engines []EngineInfo `json:"engines"`
	}
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list.Engines) != 2 {
		t.Fatalf("GET /engines: %d %s", code, body)
	}
	e := list.Engines[0]
	if e.Name != "h100-a" || e.URL != h.s.BaseURL("h100-a") || !e.Healthy || e.ReadyReplicas != 2 || e.TotalReplicas != 2 || e.SKU != "h100" {
		t.Errorf("engine 0: %+v", e)
	}
	if code, _ := h.get(t, "/engines/h100-a/health"); code != 200 {
		t.Errorf("health %d", code)
	}
	if code, _ := h.get(t, "/engines/h100-a/v1/models"); code != 200 {
		t.Errorf("models %d", code)
	}
}
