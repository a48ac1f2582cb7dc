package enginesim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
)

// Request headers the data plane sets.
const (
	HeaderConversation = "X-Conversation-Id"
	HeaderCluster      = "X-Ilb-Cluster"
)

func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /engines/{name}/v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /engines/{name}/v1/completions", s.handleCompletion)
	mux.HandleFunc("GET /engines/{name}/v1/models", s.handleModels)
	mux.HandleFunc("GET /engines/{name}/health", s.handleHealth)
	mux.HandleFunc("POST /engines/{name}/fault", s.handleFault)
	mux.HandleFunc("GET /engines", s.handleList)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	if s.cfg.MetricsHandler != nil {
		mux.Handle("GET /metrics", s.cfg.MetricsHandler)
	}
	return mux
}

func (s *Sim) engineFor(w http.ResponseWriter, r *http.Request) *simEngine {
	e := s.engine(r.PathValue("name"))
	if e == nil {
		writeError(w, http.StatusNotFound, "not_found", "no engine "+r.PathValue("name"))
	}
	return e
}

func (s *Sim) handleChat(w http.ResponseWriter, r *http.Request) {
	s.handleParsed(w, r, func(body []byte) (parsedChat, error) {
		return parseChat(body, s.cfg.DefaultOutputTokens, s.cfg.MaxOutputTokens)
	})
}

// handleParsed serves a chat or text completion whose body parse reads.
func (s *Sim) handleParsed(w http.ResponseWriter, r *http.Request, parse func([]byte) (parsedChat, error)) {
	e := s.engineFor(w, r)
	if e == nil {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "body larger than the limit")
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+err.Error())
		return
	}
	p, err := parse(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if status, typ, msg := s.checkModel(e, &p); status != 0 {
		writeError(w, status, typ, msg)
		return
	}
	ctx := s.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	_, span := s.cfg.TracerProvider.Tracer(scopeName).Start(ctx, "enginesim.chat",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("ilb.engine", e.name)))
	defer span.End()
	c := s.newCall(e, r, &p)
	c.span = span.SpanContext()
	res, ok := s.await(w, r, e, c, &p)
	if !ok {
		return
	}
	span.SetAttributes(attribute.Int("ilb.prompt_tokens", res.d.PromptTokens), attribute.Int("ilb.cached_tokens", res.d.CachedTokens))
	if res.d.Error != "" {
		span.SetAttributes(attribute.String("ilb.error", res.d.Error))
		writeEngineError(w, res.d.Error)
		return
	}
	writeJSON(w, http.StatusOK, s.completion(e, &p, &res.d))
}

// newCall builds the model request for p.
func (s *Sim) newCall(e *simEngine, r *http.Request, p *parsedChat) *call {
	conv := r.Header.Get(HeaderConversation)
	if conv == "" {
		conv = p.user
	}
	if len(conv) > schemas.MaxConversationIDLen {
		conv = conv[:schemas.MaxConversationIDLen]
	}
	cluster := r.Header.Get(HeaderCluster)
	if schemas.ValidClusterName(cluster) != nil {
		cluster = ""
	}
	c := &call{
		req: engine.Request{
			PromptTokens: promptTokens(promptBytes(p.messages)),
			OutputTokens: p.outputTokens,
			Blocks:       appendBlocks(nil, p.messages, e.spec.Load().params.BlockTokens),
		},
		conv: strings.ToValidUTF8(conv, ""), cluster: cluster, model: s.servedModel(p), stream: p.stream,
		done: make(chan result, 1),
	}
	if p.stream {
		c.first = make(chan int64, 1)
	}
	return c
}

// await hands c to the engine and, for a non-streaming call, waits for its
// result. It reports false when it already answered (or the client left).
func (s *Sim) await(w http.ResponseWriter, r *http.Request, e *simEngine, c *call, p *parsedChat) (result, bool) {
	select {
	case e.submit <- c:
	case <-r.Context().Done():
		return result{}, false
	case <-s.stopping:
		writeEngineError(w, errShutdown)
		return result{}, false
	case <-e.stopped:
		writeEngineError(w, errShutdown)
		return result{}, false
	}
	if c.stream {
		s.stream(w, r, e, c, p)
		return result{}, false
	}
	select {
	case res := <-c.done:
		return res, true
	case <-r.Context().Done():
	case <-s.stopping:
		writeEngineError(w, errShutdown)
	case <-e.stopped:
		// The owner answered every call it held before stopping; this one
		// came in after.
		select {
		case res := <-c.done:
			return res, true
		default:
			writeEngineError(w, errShutdown)
		}
	}
	return result{}, false
}

func (s *Sim) completion(e *simEngine, p *parsedChat, d *engine.Done) *chatResponse {
	reason := p.finishReason()
	out := &chatResponse{
		ID:      completionID(e.name, d.ID),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   modelName(p, e),
		Choices: []chatChoice{{
			Message:      &chatOutput{Role: "assistant", Content: s.filler[:d.OutputTokens*BytesPerToken]},
			FinishReason: &reason,
		}},
		Usage: newUsage(d.PromptTokens, d.CachedTokens, d.OutputTokens),
	}
	if p.text {
		text := out.Choices[0].Message.Content
		out.Object, out.Choices[0].Message, out.Choices[0].Text = "text_completion", nil, &text
	}
	return out
}

func completionID(engine string, id uint64) string {
	return "chatcmpl-" + engine + "-" + itoa(id)
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// modelName echoes the request's model, else names the engine's SKU.
func modelName(p *parsedChat, e *simEngine) string {
	if p.model != "" {
		return p.model
	}
	return "ilb-sim-" + e.spec.Load().fleet.SKU
}

func writeEngineError(w http.ResponseWriter, reason string) {
	if reason == engine.ErrorInjected {
		writeError(w, http.StatusInternalServerError, "server_error", "injected failure")
		return
	}
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "service_unavailable", "engine unavailable: "+reason)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, apiError{Error: apiErrorBody{Message: msg, Type: typ, Code: status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
