package enginesim

import (
	"encoding/json"
	"strings"
	"testing"
)

// textCompletion is a /v1/completions response as an OpenAI client reads it.
type textCompletion struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func completionPath(engine string) string { return "/engines/" + engine + "/v1/completions" }

// TestTextCompletion: /v1/completions answers OpenAI's text_completion,
// and a prompt that extends an earlier one hits the prefix cache.
func TestTextCompletion(t *testing.T) {
	h := start(t, nil)
	first := longSystem + "Q: what is continuous batching?\nA:"
	code, body := h.post(t, completionPath("h100-a"), map[string]any{"model": "llama", "prompt": first, "max_tokens": 8})
	var c textCompletion
	if err := json.Unmarshal(body, &c); code != 200 || err != nil {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if c.Object != "text_completion" || len(c.Choices) != 1 || len(c.Choices[0].Text) != 8*BytesPerToken ||
		c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 8 {
		t.Fatalf("completion %+v", c)
	}
	code, body = h.post(t, completionPath("h100-a"), map[string]any{"model": "llama",
		"prompt": []string{first, c.Choices[0].Text, "\nQ: and paging?\nA:"}, "max_tokens": 8})
	var c2 textCompletion
	if err := json.Unmarshal(body, &c2); code != 200 || err != nil || c2.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Fatalf("second turn: %d %s %v: want cached tokens", code, body, err)
	}
	for _, bad := range []any{map[string]any{"prompt": ""}, map[string]any{"prompt": []int{1, 2}}, map[string]any{"model": "m"}} {
		if code, body := h.post(t, completionPath("h100-a"), bad); code != 400 || !strings.Contains(string(body), "prompt") {
			t.Errorf("%v: %d %s", bad, code, body)
		}
	}
}

func TestTextCompletionStreams(t *testing.T) {
	h := start(t, nil)
	code, body := h.post(t, completionPath("h100-a"), map[string]any{"model": "llama", "prompt": "hello", "max_tokens": 4, "stream": true})
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var text strings.Builder
	events := 0
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch textCompletion
		if err := json.Unmarshal([]byte(data), &ch); err != nil || ch.Object != "text_completion" {
			t.Fatalf("chunk %q: %v", data, err)
		}
		events++
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
		}
	}
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") || events < 2 || text.Len() != 4*BytesPerToken {
		t.Fatalf("%d events, text %q: %s", events, text.String(), body)
	}
}
