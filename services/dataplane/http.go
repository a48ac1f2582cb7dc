package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/solver/sched"
)

// Request headers the data plane reads, and response headers it sets.
const (
	HeaderConversation = "X-Conversation-Id"
	HeaderCluster      = "X-Ilb-Cluster"
	HeaderEngine       = "X-Ilb-Engine"
	HeaderVersion      = "X-Ilb-Snapshot-Version"
	// HeaderModel (models.go) names the model of a header-routed request.
)

func (d *DataPlane) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		d.health.ServeHTTP(w, r)
	})
	mux.HandleFunc("/v1/routing", d.serveRouting)
	mux.HandleFunc("/v1/pick", d.servePick)
	for _, ep := range endpoints {
		mux.HandleFunc(ep.path, d.serveProxy(ep))
	}
	mux.HandleFunc("/v1/models", d.serveModels)
	mux.HandleFunc("/v1/models/{model}", d.serveModel)
	if d.deps.Metrics != nil {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			if allow(w, r, http.MethodGet, http.MethodHead) {
				d.deps.Metrics.ServeHTTP(w, r)
			}
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s %s; see /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, /v1/routing, /v1/pick, /healthz", r.Method, r.URL.Path))
	})
	return mux
}

// allow answers 405 with an Allow header unless r uses one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", methods[0])
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; use %s", r.Method, methods[0]))
	return false
}

// routingInfo is one cluster's entry of GET /v1/routing.
type routingInfo struct {
	Cluster      string             `json:"cluster"`
	Ready        bool               `json:"ready"`
	Version      uint64             `json:"version"`
	CreatedAt    *time.Time         `json:"created_at,omitempty"`
	AgeSeconds   float64            `json:"age_seconds"`
	Stale        bool               `json:"stale"`
	StaleAfterS  float64            `json:"stale_after_seconds"`
	Source       string             `json:"source,omitempty"`
	Weights      map[string]float64 `json:"weights"`
	ShedFraction float64            `json:"shed_fraction"`
	TableSlots   int                `json:"table_slots,omitempty"`
	NewShare     float64            `json:"new_conversation_share"`
	// ShedTotal and RefusedTotal count the requests refused since start,
	// by reason: the snapshot's shed fraction (ilb_dataplane_shed_total)
	// and local admission (ilb_dataplane_admission_refused_total).
	ShedTotal    int64        `json:"shed_total"`
	RefusedTotal int64        `json:"refused_total"`
	Engines      []engineInfo `json:"engines"`
	// Classes are the request classes' own routing, in a fleet of more
	// than one class (models.go): each class's table shares over the
	// engines that serve it (renormalised), times 1 − its shed fraction.
	Classes []classInfo `json:"classes,omitempty"`
}

type classInfo struct {
	Model           string             `json:"model"`
	MinPromptTokens int                `json:"min_prompt_tokens,omitempty"`
	MaxPromptTokens int                `json:"max_prompt_tokens,omitempty"`
	Weights         map[string]float64 `json:"weights"`
	ShedFraction    float64            `json:"shed_fraction"`
}

type engineInfo struct {
	Name      string  `json:"name"`
	Available bool    `json:"available"`
	Reason    string  `json:"reason,omitempty"`
	Share     float64 `json:"table_share"`
	LoadShare float64 `json:"load_share"`
	Penalised bool    `json:"latency_penalised,omitempty"`
	InFlight  int64   `json:"in_flight"`
	Picks     int64   `json:"picks"`
	// Local admission: the snapshot's limits (0: none) and the prompt
	// tokens pending prefill there, this process's and the other data
	// planes' as shared (README.md, Guardrails).
	QueueLimit    float64 `json:"queue_limit"`
	PrefillLimit  float64 `json:"prefill_limit"`
	PendingTokens int64   `json:"pending_prompt_tokens"`
	RemoteTokens  int64   `json:"others_pending_prompt_tokens"`
	// What the choice among candidates compares (routing.Busy,
	// slot.load): the requests at the engine (the other data planes' by
	// its last status, this process's own as they are now) and its load
	// (those plus the prefill pending there, over its queue limit);
	// absent while no fresh status says, or without a queue limit.
	Requests *float64 `json:"requests,omitempty"`
	Load     *float64 `json:"load,omitempty"`
}

func (d *DataPlane) serveRouting(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	now := d.now()
	name := r.URL.Query().Get("cluster")
	if name == "" {
		all := map[string]routingInfo{}
		for _, c := range d.order {
			all[c.name] = d.routingInfo(c, now)
		}
		writeJSON(w, http.StatusOK, map[string]any{"clusters": all})
		return
	}
	c, ok := d.clusters[name]
	if !ok {
		writeErrorCode(w, http.StatusNotFound, codeUnknownCluser, fmt.Sprintf("unknown cluster %q; this data plane serves %v", name, d.cfg.Clusters))
		return
	}
	writeJSON(w, http.StatusOK, d.routingInfo(c, now))
}

func (d *DataPlane) routingInfo(c *cluster, now time.Time) routingInfo {
	d.mu.Lock()
	snap, source := c.snap, c.source
	d.mu.Unlock()
	p := c.cur.Load()
	info := routingInfo{Cluster: c.name, Ready: p.err == nil, Version: p.version, Stale: p.stale,
		AgeSeconds: p.age(now).Seconds(), StaleAfterS: d.cfg.StaleAfter.Seconds(), Source: source,
		ShedFraction: p.shed, NewShare: c.newConversationShare(), Weights: map[string]float64{},
		ShedTotal: c.shed.Load(), RefusedTotal: c.refused.Load(), Engines: []engineInfo{}}
	if snap != nil {
		info.Weights = snap.Weights
		created := snap.CreatedAt
		info.CreatedAt = &created
	}
	for k, q := range p.sub {
		cl := p.cat.classes[k]
		ci := classInfo{Model: cl.Model, MinPromptTokens: cl.MinPromptTokens, MaxPromptTokens: cl.MaxPromptTokens,
			Weights: map[string]float64{}, ShedFraction: q.shed}
		if q.table != nil {
			total := 0.0
			for i, w := range q.table.Weights() {
				if name := q.slots[i].eng.name; w > 0 && p.cat.serve(name, k) {
					ci.Weights[name] = w
					total += w
				}
			}
			for name := range ci.Weights {
				ci.Weights[name] *= (1 - q.shed) / total
			}
		}
		info.Classes = append(info.Classes, ci)
	}
	if p.table == nil {
		return info
	}
	info.TableSlots = p.table.Slots()
	shares := p.table.Weights()
	mean, shared := p.loadArgs()
	for i := range p.slots {
		s := &p.slots[i]
		share := 0.0 // an overflow slot's: outside the table
		if i < len(shares) {
			share = shares[i]
		}
		e := engineInfo{Name: s.eng.name, Available: s.avail, Reason: s.why.String(),
			Share: share, LoadShare: s.share, Penalised: s.penalty != 0,
			InFlight: s.cell.inflight.Load(), Picks: s.cell.picks.Load(), QueueLimit: s.limit, PrefillLimit: s.prefill,
			PendingTokens: s.eng.live.pending.Load(), RemoteTokens: s.eng.live.remote.Load()}
		if b, ok := s.eng.live.busy(); ok {
			e.Requests = &b
		}
		if l := s.load(mean, shared); !math.IsInf(l, 0) {
			e.Load = &l
		}
		info.Engines = append(info.Engines, e)
	}
	return info
}

type pickRequest struct {
	Cluster        string `json:"cluster"`
	ConversationID string `json:"conversation_id"`
	Model          string `json:"model"`         // "" : the default model, or the X-Ilb-Model header
	PromptTokens   int    `json:"prompt_tokens"` // optional: the prompt's length, for the context band
}

type pickResponse struct {
	Engine          string `json:"engine"`
	SnapshotVersion uint64 `json:"snapshot_version"`
	Fallback        string `json:"fallback,omitempty"`
}

// servePick answers POST /v1/pick with the same guardrails as the proxy.
// Nothing is proxied, so nothing counts as in flight.
func (d *DataPlane) servePick(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	var req pickRequest
	if code, err := d.decodeBody(w, r, &req); err != nil {
		writeError(w, code, err.Error())
		return
	}
	c, code, err := d.requestCluster(firstNonEmpty(req.Cluster, r.Header.Get(HeaderCluster)))
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	if req.ConversationID == "" {
		d.answer(w, c, http.StatusBadRequest, `missing "conversation_id"`)
		return
	}
	p, err := c.cur.Load().forRequest(firstNonEmpty(req.Model, r.Header.Get(HeaderModel)), req.PromptTokens)
	if err != nil {
		status, code, msg := modelError(err, d.cat.Load().models)
		d.answerCode(w, c, status, code, msg)
		return
	}
	_, span := d.tracer.Start(r.Context(), "ilb.dataplane.pick", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("ilb.cluster", c.name), attribute.Int64("ilb.snapshot_version", int64(p.version))))
	defer span.End()
	ch, _, err := d.decide(c, p, sched.HashKey(req.ConversationID))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		d.answerPickError(w, c, err)
		return
	}
	span.SetAttributes(attribute.String("ilb.engine", p.slots[ch.idx].eng.name))
	c.countCode(http.StatusOK)
	writeJSON(w, http.StatusOK, pickResponse{Engine: p.slots[ch.idx].eng.name, SnapshotVersion: p.version, Fallback: ch.reason.String()})
}

// decodeBody reads a JSON object of at most MaxBodyBytes into v.
func (d *DataPlane) decodeBody(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, d.cfg.MaxBodyBytes))
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", d.cfg.MaxBodyBytes)
		}
		return http.StatusBadRequest, fmt.Errorf("request body is not a JSON object: %v", err)
	}
	return 0, nil
}

// requestCluster resolves the cluster a request names ("" means the only
// one served).
func (d *DataPlane) requestCluster(name string) (*cluster, int, error) {
	c, ok := d.cluster(name)
	switch {
	case ok:
		return c, 0, nil
	case name == "":
		return nil, http.StatusBadRequest, fmt.Errorf(`this data plane serves %v: name one with the "cluster" field or the %s header`, d.cfg.Clusters, HeaderCluster)
	}
	return nil, http.StatusNotFound, fmt.Errorf("unknown cluster %q; this data plane serves %v", name, d.cfg.Clusters)
}

// answer writes an error and counts it against the cluster.
func (d *DataPlane) answer(w http.ResponseWriter, c *cluster, status int, msg string) {
	c.countCode(status)
	writeError(w, status, msg)
}

// answerCode is answer with a specific envelope code.
func (d *DataPlane) answerCode(w http.ResponseWriter, c *cluster, status int, code, msg string) {
	c.countCode(status)
	writeErrorCode(w, status, code, msg)
}

// answerPickError maps a pick error to its HTTP answer.
func (d *DataPlane) answerPickError(w http.ResponseWriter, c *cluster, err error) {
	w.Header().Set("Retry-After", retryAfterSeconds(d.cfg.RetryAfter))
	switch {
	case errors.Is(err, ErrShed):
		d.answerCode(w, c, http.StatusTooManyRequests, codeShed, "load shedding: the fleet is over capacity for cluster "+c.name+"; retry later")
	case errors.Is(err, ErrAdmission):
		d.answerCode(w, c, http.StatusTooManyRequests, codeShed, "local admission: every engine cluster "+c.name+
			" may use has more requests waiting than it can start within the TTFT SLO; retry later")
	case errors.Is(err, ErrNoSnapshot):
		d.answerCode(w, c, http.StatusServiceUnavailable, codeNoSnapshot, "no snapshot yet for cluster "+c.name)
	case errors.Is(err, ErrNoEngine):
		d.answerCode(w, c, http.StatusServiceUnavailable, codeNoEngine, err.Error()+" for cluster "+c.name)
	default:
		d.answer(w, c, http.StatusServiceUnavailable, err.Error()+" for cluster "+c.name)
	}
}

func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}
