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
	names map[string]*component
}

// component is one named part's readiness and, when not ready, why.
type component struct {
	ok     atomic.Bool
	reason atomic.Pointer[string]
}

// NewHealth returns a Health with no components: it reports healthy.
func NewHealth() *Health { return &Health{names: map[string]*component{}} }

// Set marks component name ready or not, with no reason given.
func (h *Health) Set(name string, ok bool) { h.SetReason(name, ok, "") }

// SetReason marks component name ready or not; reason says why it is not
// (shown by ServeHTTP) and is dropped when ok.
func (h *Health) SetReason(name string, ok bool, reason string) {
	h.mu.Lock()
	c, found := h.names[name]
	if !found {
		c = new(component)
		h.names[name] = c
	}
	h.mu.Unlock()
	if ok {
		reason = ""
	}
	c.reason.Store(&reason)
	c.ok.Store(ok)
}

// Reason returns why component name is not ready ("" when ready, unknown
// or not given).
func (h *Health) Reason(name string) string {
	h.mu.Lock()
	c := h.names[name]
	h.mu.Unlock()
	if c == nil {
		return ""
	}
	if r := c.reason.Load(); r != nil {
		return *r
	}
	return ""
}

// Status returns every component's readiness and whether all are ready.
func (h *Health) Status() (map[string]bool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.names))
	all := true
	for n, c := range h.names {
		out[n] = c.ok.Load()
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
		Name   string `json:"name"`
		Ready  bool   `json:"ready"`
		Reason string `json:"reason,omitempty"`
	}
	body := struct {
		Status     string `json:"status"`
		Components []comp `json:"components"`
	}{Status: "ok"}
	for _, n := range names {
		body.Components = append(body.Components, comp{n, st[n], h.Reason(n)})
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		body.Status = "unavailable"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
