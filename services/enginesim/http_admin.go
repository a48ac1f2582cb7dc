package enginesim

import (
	"errors"
	"io"
	"net/http"
)

// EngineInfo is one engine in GET /engines.
type EngineInfo struct {
	Name               string  `json:"name"`
	URL                string  `json:"url,omitempty"`
	Region             string  `json:"region"`
	SKU                string  `json:"sku"`
	Healthy            bool    `json:"healthy"`
	ReadyReplicas      int64   `json:"ready_replicas"`
	TotalReplicas      int64   `json:"total_replicas"`
	Running            int64   `json:"running"`
	Waiting            int64   `json:"waiting"`
	KVCacheUtilization float64 `json:"kv_cache_utilization"`
	Slowdown           float64 `json:"slowdown"`
	ErrorRate          float64 `json:"error_rate"`
	Served             uint64  `json:"served"`
	Failed             uint64  `json:"failed"`
	Shed               uint64  `json:"shed"`
	// Draining: removed from the fleet, serving until its drain ends.
	Draining bool `json:"draining,omitempty"`
}

// Engines returns every engine's state, in fleet order.
func (s *Sim) Engines() []EngineInfo {
	list := s.set.Load().list
	out := make([]EngineInfo, len(list))
	for i, e := range list {
		out[i] = s.info(e)
	}
	return out
}

func (s *Sim) info(e *simEngine) EngineInfo {
	fe := e.spec.Load().fleet
	return EngineInfo{
		Name: e.name, URL: s.BaseURL(e.name), Region: fe.Region, SKU: fe.SKU, Draining: e.draining.Load(),
		Healthy: e.healthy.Load(), ReadyReplicas: e.ready.Load(), TotalReplicas: e.total.Load(),
		Running: e.running.Load(), Waiting: e.waiting.Load(), KVCacheUtilization: e.kvUtil.Load(),
		Slowdown: e.slowdown.Load(), ErrorRate: e.errorRate.Load(),
		Served: e.served.Load(), Failed: e.failed.Load(), Shed: e.shed.Load(),
	}
}

func (s *Sim) handleList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Engines []EngineInfo `json:"engines"`
	}{s.Engines()})
}

// handleHealth answers like vLLM's /health: 200 while the engine takes
// requests, 503 when it is unhealthy or has no ready replica.
func (s *Sim) handleHealth(w http.ResponseWriter, r *http.Request) {
	e := s.engineFor(w, r)
	if e == nil {
		return
	}
	if !e.healthy.Load() || e.ready.Load() == 0 {
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "engine unhealthy")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Sim) handleModels(w http.ResponseWriter, r *http.Request) {
	e := s.engineFor(w, r)
	if e == nil {
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{}}
	for _, id := range s.engineModels(e) {
		list.Data = append(list.Data, model{ID: id, Object: "model", OwnedBy: "ilb-enginesim"})
	}
	writeJSON(w, http.StatusOK, list)
}

// maxFaultBody bounds a fault request body.
const maxFaultBody = 64 << 10

func (s *Sim) handleFault(w http.ResponseWriter, r *http.Request) {
	e := s.engineFor(w, r)
	if e == nil {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFaultBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+err.Error())
		return
	}
	f, reset, err := parseFault(body)
	if err == nil {
		err = s.injectFault(r.Context(), e.name, f, reset)
	}
	switch {
	case errors.Is(err, ErrNotRunning):
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
	default:
		writeJSON(w, http.StatusOK, s.info(e))
	}
}
