package run

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
)

// Health tracks the readiness of named components for GET /healthz.
type Health struct {
	mu    sync.Mutex // guards names; flags are read without it
	names map[string]*atomic.Bool
}

// NewHealth returns a Health with no components: it reports healthy.
func NewHealth() *Health { return &Health{names: map[string]*atomic.Bool{}} }

// Set marks component name ready or not.
func (h *Health) Set(name string, ok bool) {
	h.mu.Lock()
	b, found := h.names[name]
	if !found {
		b = new(atomic.Bool)
		h.names[name] = b
	}
	h.mu.Unlock()
	b.Store(ok)
}

// Status returns every component's readiness and whether all are ready.
func (h *Health) Status() (map[string]bool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.names))
	all := true
	for n, b := range h.names {
		out[n] = b.Load()
		all = all && out[n]
	}
	return out, all
}

// ServeHTTP answers 200 when every component is ready, 503 otherwise, with
// a JSON body listing the components.
func (h *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	st, ok := h.Status()
	names := make([]string, 0, len(st))
	for n := range st {
		names = append(names, n)
	}
	sort.Strings(names)
	type comp struct {
		Name  string `json:"name"`
		Ready bool   `json:"ready"`
	}
	body := struct {
		Status     string `json:"status"`
		Components []comp `json:"components"`
	}{Status: "ok"}
	for _, n := range names {
		body.Components = append(body.Components, comp{n, st[n]})
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		body.Status = "unavailable"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
