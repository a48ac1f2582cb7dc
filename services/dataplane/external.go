package dataplane

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ilb-router/ilb/services/internal/affinity"
)

// ExternalRequest is a request that another proxy forwards itself (an
// Envoy gateway asking through the endpoint picker protocol, package
// extproc): the data plane picks with the same picker and guardrails as
// its own proxy, but sends nothing.
type ExternalRequest struct {
	Cluster string       // "" means the only cluster served
	Key     affinity.Key // from affinity.Resolve; Source None is spread at random
	// Model is the request's model ("" : the default model) and
	// PromptTokens its prompt's estimated length (models.go): the pick is
	// made within their class.
	Model        string
	PromptTokens int
	// Subset lists the endpoints ("host:port", or a bare host matching
	// any port) the proxy allows; nil allows every engine. Entries naming
	// no engine are ignored (ExternalPick.UnknownSubset counts them); a
	// subset that leaves no available engine is answered 503.
	Subset []string
	// Fallbacks is how many next choices to list after the pick, for the
	// proxy's own retries.
	Fallbacks int
}

// ExternalPick is a pick for an ExternalRequest. Its engine counts the
// request as in flight until FinishExternal.
type ExternalPick struct {
	Cluster string
	Version uint64
	// Engines and Endpoints are the pick, then its fallbacks in order:
	// the engine names, and their host:port from the engine URLs.
	Engines, Endpoints []string
	// UnknownSubset counts subset entries that name no known engine.
	UnknownSubset int

	c        *cluster
	p        *picker
	idx      []int // table indices, as Engines
	holder   *slot // the slot the request counts as in flight on
	start    time.Time
	finished atomic.Bool
}

// RouteError is the answer the data plane gives instead of a pick: an
// HTTP status, OpenAI's error code and message, and a Retry-After (in
// seconds) when waiting may help.
type RouteError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter string
}

func (e *RouteError) Error() string { return e.Message }

// Body is the error in OpenAI's envelope, as the HTTP proxy writes it.
func (e *RouteError) Body() []byte {
	typ, _ := defaultCode(e.Status)
	b, _ := json.Marshal(errorBody{Error: apiError{Message: e.Message, Type: typ, Code: e.Code}})
	return b
}

// PickExternal runs the guardrails (throttling, shedding, availability,
// latency penalty, bounded-load spill) for req and returns its engine and
// fallbacks, or the answer to give instead.
func (d *DataPlane) PickExternal(req ExternalRequest) (*ExternalPick, *RouteError) {
	c, status, err := d.requestCluster(req.Cluster)
	if err != nil {
		code := codeBadRequest
		if status == http.StatusNotFound {
			code = codeUnknownCluser
		}
		return nil, &RouteError{Status: status, Code: code, Message: err.Error()}
	}
	p, err := c.cur.Load().forRequest(req.Model, req.PromptTokens)
	if err != nil {
		status, code, msg := modelError(err, d.cat.Load().models)
		c.countCode(status)
		return nil, &RouteError{Status: status, Code: code, Message: msg}
	}
	if p.err == nil && !c.throttle.admit(d.rand()) {
		c.throttled.Add(1)
		return nil, d.routeError(c, http.StatusServiceUnavailable, codeThrottled, "engines are rejecting requests; throttled locally, retry later")
	}
	h := req.Key.Hash
	if req.Key.Source == affinity.None {
		h = mix64(uint64(d.rand() * (1 << 53)))
	}
	tr := tried{}
	n := req.Fallbacks + 1
	pk := &ExternalPick{Cluster: c.name, Version: p.version, c: c, p: p, start: d.now(),
		Engines: make([]string, 0, n), Endpoints: make([]string, 0, n), idx: make([]int, 0, n)}
	if req.Subset != nil && p.err == nil {
		tr.deny, pk.UnknownSubset = p.subsetDeny(req.Subset, d.knownEndpoint)
	}
	ch, ongoing, err := d.decideIn(c, p, h, req.Key.First, req.PromptTokens, &tr)
	if err != nil {
		return nil, d.pickRouteError(c, err, req.Subset != nil)
	}
	c.keySources[req.Key.Source].Add(1)
	p.slots[ch.idx].eng.live.sent.Add(1) // the gateway sends it there
	pk.add(ch.idx)
	for range req.Fallbacks {
		tr.add(ch.idx)
		if ch, err = p.pick(h, ongoing, memo{}, &tr); err != nil {
			break
		}
		pk.add(ch.idx)
	}
	pk.hold(&p.slots[pk.idx[0]])
	return pk, nil
}

func (pk *ExternalPick) add(idx int) {
	s := &pk.p.slots[idx]
	pk.idx = append(pk.idx, idx)
	pk.Engines = append(pk.Engines, s.eng.name)
	pk.Endpoints = append(pk.Endpoints, s.eng.hostPort())
}

// hold counts the request as in flight on s (the pick) until it ends.
func (pk *ExternalPick) hold(s *slot) {
	pk.c.inflight.Add(1)
	s.cell.inflight.Add(1)
	s.eng.live.own.Add(1)
	pk.holder = s
}

// FinishExternal ends an external request: the engine that served it
// (served, an endpoint; "" when the proxy did not say) answered status
// (0 when no answer came, e.g. the client left) after latency. The
// outcome feeds outlier detection and client-side throttling like a
// proxied attempt, and when the proxy served the request elsewhere than
// the pick, the pick is counted as failed (the proxy moves on only after
// a failure). Later calls for the same pick do nothing.
func (d *DataPlane) FinishExternal(pk *ExternalPick, served string, status int, latency time.Duration) {
	if pk == nil || !pk.finished.CompareAndSwap(false, true) {
		return
	}
	defer func() {
		pk.holder.cell.inflight.Add(-1)
		pk.holder.eng.live.own.Add(-1)
		pk.c.inflight.Add(-1)
	}()
	if status == 0 {
		return
	}
	s := pk.holder
	if served != "" && served != pk.Endpoints[0] {
		if other := pk.slotOf(served); other != nil {
			d.observeOutcome(pk.holder, true, 0)
			s = other
		}
	}
	pk.c.countCode(status)
	pk.c.throttle.outcome(status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable)
	d.observeOutcome(s, status >= 500, latency)
}

// slotOf finds the slot of the picker's engine at endpoint.
func (pk *ExternalPick) slotOf(endpoint string) *slot {
	for i := range pk.p.slots {
		if pk.p.slots[i].eng.hostPort() == endpoint {
			return &pk.p.slots[i]
		}
	}
	return nil
}

// observeOutcome records one outcome for outlier detection.
func (d *DataPlane) observeOutcome(s *slot, failed bool, latency time.Duration) {
	if s.eng.observe(failed, latency, d.cfg.Outlier.Consecutive5xx) {
		d.wake()
	}
}

// subsetDeny marks the table engines outside subset, and counts the
// entries that name no engine known to the data plane.
func (p *picker) subsetDeny(subset []string, known func(string) bool) ([]bool, int) {
	deny := make([]bool, len(p.slots))
	for i := range p.slots {
		deny[i] = !inSubset(p.slots[i].eng.hostPort(), subset)
	}
	unknown := 0
	for _, ep := range subset {
		if !known(ep) {
			unknown++
		}
	}
	return deny, unknown
}

// inSubset reports whether endpoint (host:port) is listed, exactly or by
// a bare host.
func inSubset(endpoint string, subset []string) bool {
	if endpoint == "" {
		return false
	}
	host, _, _ := net.SplitHostPort(endpoint)
	for _, s := range subset {
		if s == endpoint || (s == host && !strings.Contains(s, ":")) {
			return true
		}
	}
	return false
}

// knownEndpoint reports whether ep (host:port or host) names an engine
// with a URL.
func (d *DataPlane) knownEndpoint(ep string) bool { return (*d.endpoints.Load())[ep] }

// endpointSet is every configured engine's host:port and host.
func endpointSet(urls map[string]string) map[string]bool {
	set := map[string]bool{}
	for _, u := range urls {
		if ep := hostPort(u); ep != "" {
			host, _, _ := net.SplitHostPort(ep)
			set[ep], set[host] = true, true
		}
	}
	return set
}

// routeError counts status against c and returns it as a RouteError.
func (d *DataPlane) routeError(c *cluster, status int, code, msg string) *RouteError {
	c.countCode(status)
	return &RouteError{Status: status, Code: code, Message: msg, RetryAfter: retryAfterSeconds(d.cfg.RetryAfter)}
}

// pickRouteError maps a pick error as answerPickError does.
func (d *DataPlane) pickRouteError(c *cluster, err error, subset bool) *RouteError {
	switch {
	case errors.Is(err, ErrShed):
		return d.routeError(c, http.StatusTooManyRequests, codeShed, "load shedding: the fleet is over capacity for cluster "+c.name+"; retry later")
	case errors.Is(err, ErrAdmission):
		return d.routeError(c, http.StatusTooManyRequests, codeShed, "local admission: every engine cluster "+c.name+
			" may use has more requests waiting than it can start within the TTFT SLO; retry later")
	case errors.Is(err, ErrNoSnapshot):
		return d.routeError(c, http.StatusServiceUnavailable, codeNoSnapshot, "no snapshot yet for cluster "+c.name)
	case errors.Is(err, ErrNoEngine) && subset:
		return d.routeError(c, http.StatusServiceUnavailable, codeNoEngine, "no available engine in the subset the gateway allows for cluster "+c.name)
	}
	return d.routeError(c, http.StatusServiceUnavailable, codeNoEngine, err.Error()+" for cluster "+c.name)
}

// NeedsModel reports whether a request must name its model to be routed
// (the fleet serves several): a gateway may then route on headers alone
// only with the X-Ilb-Model header.
func (d *DataPlane) NeedsModel() bool { return d.cat.Load().multiModel() }

// DefaultCluster is the cluster of requests that name none: the only one
// served, or Config.DefaultCluster; "" when requests must name one.
func (d *DataPlane) DefaultCluster() string {
	if d.single == nil {
		return ""
	}
	return d.single.name
}

// Clusters returns the clusters this data plane serves, sorted.
func (d *DataPlane) Clusters() []string {
	out := make([]string, len(d.order))
	for i, c := range d.order {
		out[i] = c.name
	}
	return out
}
