package dataplane

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// openaiClient is the official Go SDK pointed at h, with its own retries
// off so that each call is one request.
func openaiClient(t *testing.T, h http.Handler) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	return &c
}

func TestOpenAIGoClientThroughTheProxy(t *testing.T) {
	_, es, h := proxyFixture(t, nil, "eng-a", "eng-b")
	client := openaiClient(t, h)
	ctx := context.Background()

	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "default" || models.Data[0].Object != "model" {
		t.Fatalf("models.list: %+v, %v; want the one implicit model", models, err)
	}
	if m, err := client.Models.Get(ctx, "default"); err != nil || m.ID != "default" {
		t.Fatalf("models.retrieve: %+v, %v", m, err)
	}

	var resp *http.Response
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")}},
		option.WithResponseInto(&resp))
	if err != nil || len(chat.Choices) != 1 || chat.Choices[0].Message.Content != "hi" || resp.Header.Get(HeaderEngine) == "" {
		t.Fatalf("chat: %+v, %v", chat, err)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")}})
	if text := collect(stream.Next, func() string {
		if c := stream.Current(); len(c.Choices) > 0 {
			return c.Choices[0].Delta.Content
		}
		return ""
	}); stream.Err() != nil || text != "tok0tok1tok2" {
		t.Fatalf("chat stream: %q, %v", text, stream.Err())
	}

	cmpl, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "m",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon")}})
	if err != nil || len(cmpl.Choices) != 1 || cmpl.Choices[0].Text != "hi" {
		t.Fatalf("completion: %+v, %v", cmpl, err)
	}
	cs := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "m",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon")}})
	if text := collect(cs.Next, func() string {
		if c := cs.Current(); len(c.Choices) > 0 {
			return c.Choices[0].Text
		}
		return ""
	}); cs.Err() != nil || text != "tok0tok1tok2" {
		t.Fatalf("completion stream: %q, %v", text, cs.Err())
	}

	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "e",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("text")}})
	if err != nil || len(emb.Data) != 1 || !slices.Equal(emb.Data[0].Embedding, []float64{0.5, 0.25}) {
		t.Fatalf("embeddings: %+v, %v", emb, err)
	}
	paths := map[string]bool{}
	for _, e := range es {
		if p, ok := e.path.Load().(string); ok {
			paths[p] = true
		}
	}
	if len(paths) == 0 {
		t.Fatal("no engine saw a request")
	}
}

func collect(next func() bool, cur func() string) string {
	var b strings.Builder
	for next() {
		b.WriteString(cur())
	}
	return b.String()
}

// TestOpenAIGoClientErrors: the data plane's own errors reach the SDK as
// OpenAI errors with a status, a type, a code and a message.
func TestOpenAIGoClientErrors(t *testing.T) {
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	check := func(t *testing.T, err error, status int, typ, code string) *openai.Error {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v is not an *openai.Error", err)
		}
		if apiErr.StatusCode != status || apiErr.Type != typ || apiErr.Code != code || apiErr.Message == "" {
			t.Fatalf("got %d type %q code %q message %q, want %d %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message, status, typ, code)
		}
		return apiErr
	}
	t.Run("shed", func(t *testing.T) {
		d, _, h := proxyFixture(t, nil, "eng-a")
		s := snap("fe-a", 8, map[string]float64{})
		s.ShedFraction, s.CreatedAt = 1, d.now()
		mustSet(t, d, s)
		_, err := openaiClient(t, h).Chat.Completions.New(ctx, params)
		e := check(t, err, 429, "rate_limit_error", "rate_limit_exceeded")
		if e.Response.Header.Get("Retry-After") != "1" {
			t.Fatalf("Retry-After %q, want 1", e.Response.Header.Get("Retry-After"))
		}
	})
	t.Run("no snapshot", func(t *testing.T) {
		cfg := testConfig("fe-a")
		cfg.EngineURLs = map[string]string{"eng-a": "http://127.0.0.1:1"}
		_, err := openaiClient(t, newDP(t, cfg, Deps{}).Handler()).Chat.Completions.New(ctx, params)
		check(t, err, 503, "server_error", "no_snapshot")
	})
	t.Run("no engine available", func(t *testing.T) {
		d, _, h := proxyFixture(t, nil, "eng-a")
		d.ObserveStatus(unhealthy("eng-a"))
		_, err := openaiClient(t, h).Completions.New(ctx, openai.CompletionNewParams{Model: "m",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}})
		check(t, err, 503, "server_error", "no_engine_available")
	})
	t.Run("upstream failure after retries", func(t *testing.T) {
		cfg := testConfig("fe-a")
		cfg.EngineURLs = map[string]string{"eng-a": "http://127.0.0.1:1", "eng-b": "http://127.0.0.1:1"}
		d := newDP(t, cfg, Deps{})
		mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5}))
		_, err := openaiClient(t, d.Handler()).Chat.Completions.New(ctx, params)
		check(t, err, 502, "server_error", "upstream_unavailable")
	})
	t.Run("unknown model", func(t *testing.T) {
		_, _, h := proxyFixture(t, nil, "eng-a")
		_, err := openaiClient(t, h).Models.Get(ctx, "gpt-9")
		check(t, err, 404, "invalid_request_error", "model_not_found")
	})
	t.Run("unknown cluster", func(t *testing.T) {
		_, _, h := proxyFixture(t, nil, "eng-a")
		_, err := openaiClient(t, h).Chat.Completions.New(ctx, params, option.WithHeader(HeaderCluster, "fe-z"))
		check(t, err, 404, "invalid_request_error", "not_found")
	})
	t.Run("engine errors pass through", func(t *testing.T) {
		_, es, h := proxyFixture(t, func(c *Config) { c.MaxRetries = 0 }, "eng-a")
		es[0].code.Store(400)
		_, err := openaiClient(t, h).Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "engine failure" || apiErr.Code != "engine" {
			t.Fatalf("engine 400: %v", err)
		}
	})
}

// TestModelsListsEngineModels: with per-engine model lists, GET /v1/models
// is their union over the engines of the served snapshots, sorted.
func TestModelsListsEngineModels(t *testing.T) {
	cfg := testConfig("fe-a")
	cfg.EngineModels = map[string][]string{"eng-a": {"llama-3-70b", "llama-3-8b"}, "eng-b": {"llama-3-8b"}, "eng-z": {"not-routed"}}
	d := newDP(t, cfg, Deps{})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5}))
	models, err := openaiClient(t, d.Handler()).Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"llama-3-70b", "llama-3-8b"}) {
		t.Fatalf("models %v, want [llama-3-70b llama-3-8b]", ids)
	}

	// A fleet reload: eng-c joins with a model of its own, eng-a leaves.
	d.UpdateModels(map[string][]string{"eng-b": {"llama-3-8b"}, "eng-c": {"mistral-7b"}}, "")
	mustSet(t, d, snap("fe-a", 2, map[string]float64{"eng-b": 0.5, "eng-c": 0.5}))
	if got := d.Models(); !slices.Equal(got, []string{"llama-3-8b", "mistral-7b"}) {
		t.Fatalf("models after the reload %v, want [llama-3-8b mistral-7b]", got)
	}
}

// TestErrorEnvelope: every error the data plane writes is OpenAI's
// envelope, including for bodies no SDK would send.
func TestErrorEnvelope(t *testing.T) {
	_, _, h := proxyFixture(t, func(c *Config) { c.MaxBodyBytes = 64 }, "eng-a")
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/chat/completions", `{"messages":`, 400, "invalid_request"},
		{"POST", "/v1/completions", `[1,2]`, 400, "invalid_request"},
		{"POST", "/v1/embeddings", strings.Repeat("x", 100), 413, "request_too_large"},
		{"GET", "/v1/completions", ``, 405, "method_not_allowed"},
		{"POST", "/v1/models", ``, 405, "method_not_allowed"},
		{"GET", "/v1/nothing", ``, 404, "not_found"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
		e := decodeJSON[errorBody](t, rec).Error
		if rec.Code != c.status || e.Code != c.code || e.Type != "invalid_request_error" || e.Message == "" ||
			!strings.Contains(rec.Body.String(), `"param":null`) {
			t.Errorf("%s %s: %d %s, want %d code %s", c.method, c.path, rec.Code, rec.Body, c.status, c.code)
		}
	}
}

// TestDefaultCluster: with several clusters, a client that names none is
// served by DefaultCluster; a default that is not served is refused.
func TestDefaultCluster(t *testing.T) {
	e := newEngine(t, "eng-a")
	cfg := testConfig("fe-a", "fe-b")
	cfg.EngineURLs, cfg.DefaultCluster = engineURLs(e), "fe-b"
	d := newDP(t, cfg, Deps{})
	mustSet(t, d, snap("fe-b", 1, map[string]float64{"eng-a": 1}))
	chat, err := openaiClient(t, d.Handler()).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || chat.Choices[0].Message.Content != "hi" || d.DefaultCluster() != "fe-b" {
		t.Fatalf("no cluster named, default fe-b: %v %v", chat, err)
	}
	cfg.DefaultCluster = "fe-z"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "default cluster") {
		t.Fatalf("default cluster fe-z: %v", err)
	}
}
