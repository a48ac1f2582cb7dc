package dataplane

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/ilb-router/ilb/services/internal/affinity"
)

// OpenAI's error types: the "type" of the error envelope.
const (
	errInvalidRequest = "invalid_request_error"
	errRateLimit      = "rate_limit_error"
	errServer         = "server_error"
)

// Error codes: the "code" of the envelope, which clients branch on.
const (
	codeBadRequest    = "invalid_request"
	codeNotFound      = "not_found"
	codeMethod        = "method_not_allowed"
	codeTooLarge      = "request_too_large"
	codeUnknownCluser = "unknown_cluster"
	codeModel         = "model_not_found"
	codeContext       = "context_length_exceeded"
	codeShed          = "rate_limit_exceeded"
	codeNoSnapshot    = "no_snapshot"
	codeNoEngine      = "no_engine_available"
	codeThrottled     = "throttled"
	codeUpstream      = "upstream_unavailable"
	codeUnavailable   = "service_unavailable"
)

// errorBody is OpenAI's error envelope, which the official SDKs parse:
// {"error": {"message", "type", "param", "code"}}.
type errorBody struct {
	Error apiError `json:"error"`
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// defaultCode is the envelope's type and code for a status when the
// caller gives no more specific code.
func defaultCode(status int) (typ, code string) {
	switch status {
	case http.StatusNotFound:
		return errInvalidRequest, codeNotFound
	case http.StatusMethodNotAllowed:
		return errInvalidRequest, codeMethod
	case http.StatusRequestEntityTooLarge:
		return errInvalidRequest, codeTooLarge
	case http.StatusTooManyRequests:
		return errRateLimit, codeShed
	case http.StatusBadGateway:
		return errServer, codeUpstream
	case http.StatusServiceUnavailable:
		return errServer, codeUnavailable
	}
	if status >= 500 {
		return errServer, codeUnavailable
	}
	return errInvalidRequest, codeBadRequest
}

// writeError answers status with OpenAI's envelope and the status's
// default code.
func writeError(w http.ResponseWriter, status int, msg string) {
	_, code := defaultCode(status)
	writeErrorCode(w, status, code, msg)
}

// writeErrorCode answers status with OpenAI's envelope and code.
func writeErrorCode(w http.ResponseWriter, status int, code, msg string) {
	typ, _ := defaultCode(status)
	writeJSON(w, status, errorBody{Error: apiError{Message: msg, Type: typ, Code: code}})
}

// model is one entry of GET /v1/models, as OpenAI lists it.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func newModel(id string) model { return model{ID: id, Object: "model", OwnedBy: "ilb"} }

// serveModels answers GET /v1/models with OpenAI's list.
func (d *DataPlane) serveModels(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range d.Models() {
		list.Data = append(list.Data, newModel(m))
	}
	writeJSON(w, http.StatusOK, list)
}

// serveModel answers GET /v1/models/{model}.
func (d *DataPlane) serveModel(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	id := r.PathValue("model")
	if !slices.Contains(d.Models(), id) {
		writeErrorCode(w, http.StatusNotFound, codeModel, fmt.Sprintf("the model %q does not exist; GET /v1/models lists %v", id, d.Models()))
		return
	}
	writeJSON(w, http.StatusOK, newModel(id))
}

// endpoint is an OpenAI endpoint the proxy forwards to the engines.
type endpoint struct {
	kind affinity.Kind
	path string // on the data plane and on the engine
}

// endpoints are the proxied endpoints, indexed by affinity.Kind.
var endpoints = [...]endpoint{
	affinity.Chat:       {affinity.Chat, "/v1/chat/completions"},
	affinity.Completion: {affinity.Completion, "/v1/completions"},
	affinity.Embedding:  {affinity.Embedding, "/v1/embeddings"},
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
