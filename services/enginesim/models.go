package enginesim

import (
	"fmt"
	"net/http"
	"slices"
)

// A simulated engine serves the models the fleet file lists for it, as a
// vLLM server serves its --served-model-name: a request for another model
// is answered 404, and a prompt longer than its max_context_tokens 400,
// with vLLM's messages. A fleet whose engines list no models has one
// implicit model, and every engine takes any model name (as before
// models existed).

// checkModel returns the status, error type and message of a request the
// engine does not serve, or status 0.
func (s *Sim) checkModel(e *simEngine, p *parsedChat) (int, string, string) {
	f, fe := s.fleet(), e.spec.Load().fleet
	if f.ExplicitModels() && p.model != "" && !slices.Contains(f.EngineModels(fe), p.model) {
		return http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", p.model)
	}
	if n := promptTokens(promptBytes(p.messages)); fe.MaxContextTokens > 0 && n > fe.MaxContextTokens {
		return http.StatusBadRequest, "BadRequestError", fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens.", fe.MaxContextTokens, n)
	}
	return 0, "", ""
}

// servedModel is the model a request is served as: the one it names, or
// the fleet's default for one naming none (empty for the unnamed
// implicit model).
func (s *Sim) servedModel(p *parsedChat) string {
	if p.model != "" {
		return p.model
	}
	m, _ := s.fleet().RequestModel("")
	return m
}

// engineModels are the model ids GET /v1/models lists for e: its models
// in a fleet that lists them, else its one implicit model.
func (s *Sim) engineModels(e *simEngine) []string {
	if f := s.fleet(); f.ExplicitModels() {
		return f.EngineModels(e.spec.Load().fleet)
	}
	return []string{modelName(&parsedChat{}, e)}
}
