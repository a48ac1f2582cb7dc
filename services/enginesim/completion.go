package enginesim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// completionRequest is the part of an OpenAI (legacy) completion request
// the simulator reads.
type completionRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
}

// handleCompletion serves POST /engines/NAME/v1/completions: the prompt
// is simulated as one message of role "prompt", so a prompt that grows
// turn by turn shares its earlier blocks, and the answer is OpenAI's
// text_completion (chunks when streaming).
func (s *Sim) handleCompletion(w http.ResponseWriter, r *http.Request) {
	s.handleParsed(w, r, func(body []byte) (parsedChat, error) {
		return parseCompletion(body, s.cfg.DefaultOutputTokens, s.cfg.MaxOutputTokens)
	})
}

// parseCompletion decodes and checks a completion body; the prompt is a
// string or an array of strings (joined). Token-id prompts are refused:
// the simulator has no tokenizer to turn them back into text.
func parseCompletion(body []byte, defaultTokens, maxTokens int) (parsedChat, error) {
	var r completionRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return parsedChat{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	prompt, err := promptText(r.Prompt)
	if err != nil {
		return parsedChat{}, err
	}
	p := parsedChat{model: r.Model, stream: r.Stream, user: r.User, outputTokens: defaultTokens, text: true,
		messages: []message{{Role: "prompt", Content: prompt}}}
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

func promptText(raw json.RawMessage) (string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return "", errors.New("prompt must not be empty")
		}
		return one, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return "", errors.New("prompt must be a non-empty string or array of strings (token-id prompts are not simulated)")
	}
	return strings.Join(many, ""), nil
}
