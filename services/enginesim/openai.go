package enginesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// chatRequest is the part of an OpenAI chat completion request the
// simulator reads; other fields are accepted and ignored.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
}

type chatMessage struct {
	Role    string      `json:"role"`
	Content chatContent `json:"content"`
}

// chatContent is a message's content: a string, null, or an array of
// parts of which the "text" ones count (images and audio are ignored).
type chatContent string

func (c *chatContent) UnmarshalJSON(b []byte) error {
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = chatContent(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("content must be a string, null or an array of parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			sb.WriteString(p.Text)
		}
	}
	*c = chatContent(sb.String())
	return nil
}

// parsedChat is a validated request.
type parsedChat struct {
	model        string
	messages     []message
	outputTokens int
	lengthSet    bool // max_tokens given: finish_reason "length", else "stop"
	stream       bool
	includeUsage bool
	user         string
	text         bool // a text completion (/v1/completions), not a chat
}

// parseChat decodes and checks a request body. Output tokens are
// max_completion_tokens, else max_tokens, else defaultTokens, capped at
// maxTokens: the simulated model always generates exactly that many, as
// vLLM does with ignore_eos.
func parseChat(body []byte, defaultTokens, maxTokens int) (parsedChat, error) {
	var r chatRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return parsedChat{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	if len(r.Messages) == 0 {
		return parsedChat{}, errors.New("messages must be a non-empty array")
	}
	p := parsedChat{model: r.Model, stream: r.Stream, user: r.User, outputTokens: defaultTokens,
		messages: make([]message, len(r.Messages))}
	for i, m := range r.Messages {
		if m.Role == "" {
			return parsedChat{}, fmt.Errorf("messages[%d].role is empty", i)
		}
		p.messages[i] = message{Role: m.Role, Content: string(m.Content)}
	}
	limit := r.MaxCompletionTokens
	if limit == nil {
		limit = r.MaxTokens
	}
	if limit != nil {
		if *limit < 1 {
			return parsedChat{}, fmt.Errorf("max_tokens %d must be at least 1", *limit)
		}
		p.outputTokens, p.lengthSet = min(*limit, maxTokens), true
	}
	p.includeUsage = r.StreamOptions != nil && r.StreamOptions.IncludeUsage
	return p, nil
}

func (p *parsedChat) finishReason() string {
	if p.lengthSet {
		return "length"
	}
	return "stop"
}

// The response bodies.
type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      *chatOutput `json:"message,omitempty"`
	Text         *string     `json:"text,omitempty"` // text completions
	Delta        *chatOutput `json:"delta,omitempty"`
	FinishReason *string     `json:"finish_reason"`
	Logprobs     *struct{}   `json:"logprobs"`
}

type chatOutput struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func newUsage(prompt, cached, output int) *chatUsage {
	u := &chatUsage{PromptTokens: prompt, CompletionTokens: output, TotalTokens: prompt + output}
	u.PromptTokensDetails.CachedTokens = cached
	return u
}

// apiError is OpenAI's error body.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
}
