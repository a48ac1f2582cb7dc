package traffic

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Request headers the data plane reads (DESIGN.md, Data plane HTTP).
const (
	HeaderCluster      = "X-Ilb-Cluster"
	HeaderConversation = "X-Conversation-Id"
	headerEngine       = "X-Ilb-Engine" // set by the data plane on proxied answers
)

// maxBodyBytes bounds how much of a response is read.
const maxBodyBytes = 8 << 20

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages"`
	MaxTokens     int            `json:"max_tokens"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	User          string         `json:"user"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatResponse is the part of a completion (or of one streamed chunk) the
// generator reads.
type chatResponse struct {
	Choices []struct {
		Message *struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// result is the outcome of one request.
type result struct {
	status       int   // HTTP status; 0 when none came
	err          error // transport or decoding problem
	content      string
	engine       string
	promptTokens int
	cachedTokens int
	outputTokens int // usage.completion_tokens; 0 when not reported
	latency      time.Duration
	// streamed is true for an answer read as server-sent events: only
	// then are ttft and tbot measured.
	streamed bool
	ttft     time.Duration // to the first content chunk
	tbot     time.Duration // mean between output tokens (meanTBOT)
}

// client sends chat completions to the data plane.
type client struct {
	http    *http.Client
	url     string
	stream  bool
	timeout time.Duration
}

func newClient(cfg *Config) *client {
	rt := cfg.Transport
	if rt == nil {
		rt = &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        cfg.MaxInFlight,
			MaxIdleConnsPerHost: cfg.MaxInFlight,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	return &client{http: &http.Client{Transport: rt}, url: strings.TrimRight(cfg.BaseURL, "/") + "/v1/chat/completions",
		stream: cfg.Stream, timeout: cfg.RequestTimeout}
}

// send posts one turn and reads the answer.
func (c *client) send(ctx context.Context, s *Script, msgs []message, maxTokens int) result {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body, err := json.Marshal(chatRequest{Model: cmp.Or(s.Model, "ilb-traffic"), Messages: msgs, MaxTokens: maxTokens,
		Stream: c.stream, StreamOptions: c.streamOptions(), User: s.ID})
	if err != nil {
		return result{err: fmt.Errorf("encode request: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderCluster, s.Cluster)
	req.Header.Set(HeaderConversation, s.ID)
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return result{err: err, latency: time.Since(start)}
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode, engine: resp.Header.Get(headerEngine)}
	body2 := io.LimitReader(resp.Body, maxBodyBytes)
	switch {
	case resp.StatusCode != http.StatusOK:
		_, _ = io.Copy(io.Discard, io.LimitReader(body2, 64<<10))
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		r.err = readStream(body2, &r, start)
	default:
		r.err = readCompletion(body2, &r)
	}
	r.latency = time.Since(start)
	return r
}

func (c *client) streamOptions() *streamOptions {
	if !c.stream {
		return nil
	}
	return &streamOptions{IncludeUsage: true}
}

func readCompletion(body io.Reader, r *result) error {
	var cr chatResponse
	if err := json.NewDecoder(body).Decode(&cr); err != nil {
		return fmt.Errorf("decode completion: %w", err)
	}
	if len(cr.Choices) == 0 || cr.Choices[0].Message == nil {
		return errors.New("completion has no choices[0].message")
	}
	r.content = cr.Choices[0].Message.Content
	r.usage(&cr)
	return nil
}

func (r *result) usage(cr *chatResponse) {
	if cr.Usage != nil {
		r.promptTokens = cr.Usage.PromptTokens
		r.outputTokens = cr.Usage.CompletionTokens
		r.cachedTokens = cr.Usage.PromptTokensDetails.CachedTokens
	}
}

// readStream reads server-sent events up to "data: [DONE]", gathering the
// content deltas and the usage chunk, and timing the first token and the
// mean time between tokens: from the first content chunk to the last one
// over the tokens between them (the usage's completion_tokens, else one a
// chunk; an engine may send several tokens a chunk).
func readStream(body io.Reader, r *result, start time.Time) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxBodyBytes)
	var sb strings.Builder
	var first, last time.Time
	chunks := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue // blank separators, comments, other fields
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			r.content, r.streamed = sb.String(), true
			r.tbot = meanTBOT(first, last, cmp.Or(r.outputTokens, chunks))
			return nil
		}
		var cr chatResponse
		if err := json.Unmarshal([]byte(data), &cr); err != nil {
			return fmt.Errorf("decode stream chunk: %w", err)
		}
		if content(&cr, &sb) {
			last = time.Now()
			if chunks == 0 {
				first, r.ttft = last, last.Sub(start)
			}
			chunks++
		}
		r.usage(&cr)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stream: %w", err)
	}
	return errors.New("stream ended before [DONE]")
}

// content appends a chunk's content deltas to sb and reports whether it
// had any.
func content(cr *chatResponse, sb *strings.Builder) bool {
	had := false
	for _, ch := range cr.Choices {
		if ch.Delta != nil && ch.Delta.Content != "" {
			sb.WriteString(ch.Delta.Content)
			had = true
		}
	}
	return had
}
