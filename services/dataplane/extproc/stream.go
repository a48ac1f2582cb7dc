package extproc

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/internal/affinity"
)

// Request headers the picker reads (Envoy sends names in lower case).
const (
	headerPath         = ":path"
	headerStatus       = ":status"
	headerConversation = "x-conversation-id"
	headerCluster      = "x-ilb-cluster"
	headerModel        = "x-ilb-model"
	headerLength       = "content-length"
)

// stream is one ext_proc stream's state: one HTTP request.
type stream struct {
	s   *Server
	srv extprocv3.ExternalProcessor_ProcessServer

	// The gateway's body modes (from its ProtocolConfiguration; GIE's
	// FULL_DUPLEX_STREAMED when it sends none) and observability mode.
	reqMode, respMode filterv3.ProcessingMode_BodySendMode
	observe           bool

	// The request.
	gotHeaders bool
	kind       affinity.Kind
	parseBody  bool // the path is an OpenAI endpoint whose body names the key
	conv       string
	cluster    string
	model      string // the x-ilb-model header
	length     int64  // the content-length header; 0 when absent
	subset     []string
	hasSubset  bool
	body       []byte
	decided    bool // the pick was sent (or answered instead)

	// The pick and the answer.
	pick    *dataplane.ExternalPick
	picked  time.Time
	served  string
	status  int
	latency time.Duration
	ended   bool // the response is complete
}

func newStream(s *Server, srv extprocv3.ExternalProcessor_ProcessServer) *stream {
	return &stream{s: s, srv: srv, reqMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		respMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED}
}

// midRequest reports whether the stream ends before its request did.
func (st *stream) midRequest() bool { return st.gotHeaders && !st.ended }

// finish releases the pick with what the response path told.
func (st *stream) finish() {
	if st.pick != nil {
		st.s.plane.FinishExternal(st.pick, st.served, st.status, st.latency)
	}
}

// protocolError ends the stream: the gateway sent messages out of order.
func (st *stream) protocolError(msg string) error {
	st.s.counts.errors[reasonProtocol].Add(1)
	return status.Error(codes.InvalidArgument, "ext_proc: "+msg)
}

// send writes one response; a send that fails means the gateway is gone.
func (st *stream) send(resp *extprocv3.ProcessingResponse) error {
	if st.observe || resp == nil {
		return nil
	}
	if err := st.srv.Send(resp); err != nil {
		st.s.counts.errors[reasonClientGone].Add(1)
		return status.Errorf(codes.Unavailable, "ext_proc: sending a response: %v", err)
	}
	return nil
}

// handle processes one message; done means the request was answered with
// an ImmediateResponse and the stream is over.
func (st *stream) handle(req *extprocv3.ProcessingRequest) (bool, error) {
	if pc := req.GetProtocolConfig(); pc != nil {
		st.reqMode, st.respMode = pc.GetRequestBodyMode(), pc.GetResponseBodyMode()
	}
	st.observe = st.observe || req.GetObservabilityMode()
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return st.onRequestHeaders(req, v.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return st.onRequestBody(v.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return st.onRequestTrailers(req)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return false, st.onResponseHeaders(req, v.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return false, st.onResponseBody(v.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		st.ended = true
		return false, st.send(continueResponse(req))
	}
	return false, st.protocolError("a ProcessingRequest with no request, response, body or trailers set")
}

func (st *stream) onRequestHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) (bool, error) {
	if st.gotHeaders {
		return false, st.protocolError("request headers sent twice on one stream")
	}
	st.gotHeaders = true
	st.readHeaders(h)
	st.subset, st.hasSubset = metadataStrings(req, SubsetNamespace, SubsetKey)
	switch {
	case h.GetEndOfStream() || st.headersSuffice():
		return st.decide(onHeaders, nil, func(pk *dataplane.ExternalPick) error {
			return st.send(requestHeadersResponse(pickMutation(pk)))
		})
	case st.reqMode == filterv3.ProcessingMode_BUFFERED:
		// The body comes only after the headers are answered; the pick
		// goes with the body response.
		return false, st.send(continueResponse(req))
	case st.reqMode != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		// No body to wait for (NONE), or one that cannot be held back
		// (STREAMED): decide on what the headers say.
		return st.decide(onHeaders, nil, func(pk *dataplane.ExternalPick) error {
			return st.send(requestHeadersResponse(pickMutation(pk)))
		})
	}
	return false, nil // buffer the body, answer the headers with the pick
}

// readHeaders keeps the headers the pick needs.
func (st *stream) readHeaders(h *extprocv3.HttpHeaders) {
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch strings.ToLower(hv.GetKey()) {
		case headerPath:
			path, _, _ := strings.Cut(headerValue(hv), "?")
			st.kind, st.parseBody = kindOf(path)
		case headerConversation:
			st.conv = headerValue(hv)
		case headerCluster:
			st.cluster = headerValue(hv)
		case headerModel:
			st.model = headerValue(hv)
		case headerLength:
			st.length, _ = strconv.ParseInt(headerValue(hv), 10, 64)
		}
	}
}

// kindOf maps a request path to the OpenAI endpoint whose body the key
// may come from.
func kindOf(path string) (affinity.Kind, bool) {
	switch path {
	case "/v1/chat/completions":
		return affinity.Chat, true
	case "/v1/completions":
		return affinity.Completion, true
	case "/v1/embeddings":
		return affinity.Embedding, true
	}
	return affinity.Embedding, false
}

// headersSuffice reports whether the headers name the affinity key, the
// cluster (or the data plane has a default one) and, in a fleet of
// several models, the model (x-ilb-model), so the body need not be read.
func (st *stream) headersSuffice() bool {
	return st.conv != "" && (st.cluster != "" || st.s.plane.DefaultCluster() != "") &&
		(st.model != "" || !st.s.plane.NeedsModel())
}

// decide picks (from the headers, and the body when given) and sends the
// pick with emit, or answers with an ImmediateResponse (done).
func (st *stream) decide(on decision, body []byte, emit func(*dataplane.ExternalPick) error) (bool, error) {
	st.decided = true
	req := dataplane.ExternalRequest{Cluster: st.cluster, Fallbacks: st.s.cfg.Fallbacks}
	if st.hasSubset {
		req.Subset = append([]string{}, st.subset...) // non-nil: an empty hint allows nothing
	}
	var b affinity.Body
	if body != nil && st.parseBody {
		var err error
		if b, err = affinity.ParseBody(st.kind, body, st.s.cfg.PromptAffinity); err != nil {
			return st.reject(&dataplane.RouteError{Status: http.StatusBadRequest, Code: "invalid_request", Message: err.Error()})
		}
		if req.Cluster == "" {
			req.Cluster = b.Cluster
		}
	}
	req.Model, req.PromptTokens = st.model, dataplane.EstimatePromptTokens(st.length)
	if b.Model != "" {
		req.Model = b.Model
	}
	if body != nil {
		req.PromptTokens = dataplane.EstimatePromptTokens(int64(len(body)))
	}
	req.Key = affinity.Resolve(st.conv, b)
	pk, rerr := st.s.plane.PickExternal(req)
	if rerr != nil {
		return st.reject(rerr)
	}
	if pk.UnknownSubset > 0 {
		st.s.counts.errors[reasonUnknownSubset].Add(1)
	}
	st.s.counts.decisions[on].Add(1)
	st.pick, st.picked = pk, st.s.now()
	return false, emit(pk)
}

// reject answers the request itself and ends the stream.
func (st *stream) reject(e *dataplane.RouteError) (bool, error) {
	st.s.counts.immediateAt(e.Status).Add(1)
	st.ended = true
	return true, st.send(immediate(e))
}

func (st *stream) onRequestBody(b *extprocv3.HttpBody) (bool, error) {
	if !st.gotHeaders {
		return false, st.protocolError("a request body before the request headers")
	}
	if st.decided {
		return false, st.passBody(false, b)
	}
	if len(st.body)+len(b.GetBody()) > st.s.cfg.MaxBodyBytes {
		st.s.counts.errors[reasonBodyTooLarge].Add(1)
		return st.reject(&dataplane.RouteError{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large",
			Message: "request body over " + strconv.Itoa(st.s.cfg.MaxBodyBytes) + " bytes"})
	}
	st.body = append(st.body, b.GetBody()...)
	switch {
	case st.reqMode == filterv3.ProcessingMode_BUFFERED:
		return st.decide(onBody, st.body, func(pk *dataplane.ExternalPick) error {
			return st.send(requestBodyResponse(pickMutation(pk)))
		})
	case b.GetEndOfStream():
		return st.decideOnBody(true)
	}
	return false, nil
}

// decideOnBody decides on the buffered body, then sends the deferred
// headers response and the body back in chunks (eos on the last one
// unless trailers follow).
func (st *stream) decideOnBody(eos bool) (bool, error) {
	body := st.body
	st.body = nil
	return st.decide(onBody, body, func(pk *dataplane.ExternalPick) error {
		if err := st.send(requestHeadersResponse(pickMutation(pk))); err != nil {
			return err
		}
		return chunks(body, eos, func(piece []byte, last bool) error { return st.send(streamedChunk(false, piece, last)) })
	})
}

// passBody answers a body message after the pick: in FULL_DUPLEX_STREAMED
// mode the gateway forwards only what the picker sends back, so the chunk
// is streamed back; in the other modes it is let through.
func (st *stream) passBody(response bool, b *extprocv3.HttpBody) error {
	mode := st.reqMode
	if response {
		mode = st.respMode
	}
	if mode != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		if response {
			return st.send(continueResponse(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{}}))
		}
		return st.send(continueResponse(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{}}))
	}
	return chunks(b.GetBody(), b.GetEndOfStream(), func(piece []byte, eos bool) error {
		return st.send(streamedChunk(response, piece, eos))
	})
}

func (st *stream) onRequestTrailers(req *extprocv3.ProcessingRequest) (bool, error) {
	if !st.gotHeaders {
		return false, st.protocolError("request trailers before the request headers")
	}
	if !st.decided { // trailers mark the end of a buffered body
		if done, err := st.decideOnBody(false); done || err != nil {
			return done, err
		}
	}
	return false, st.send(continueResponse(req))
}

// onResponseHeaders learns the status and the endpoint that served the
// request, and names the engine in X-Ilb-Engine as the HTTP proxy does.
func (st *stream) onResponseHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) error {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.GetKey() == headerStatus {
			st.status, _ = strconv.Atoi(headerValue(hv))
		}
	}
	if served, ok := metadataStrings(req, MetadataNamespace, ServedKey); ok && len(served) > 0 {
		st.served = served[0]
	}
	if st.pick != nil {
		st.latency = st.s.now().Sub(st.picked)
	}
	if h.GetEndOfStream() {
		st.ended = true
	}
	resp := continueResponse(req)
	if st.pick != nil {
		name := st.pick.Engines[0]
		for i, ep := range st.pick.Endpoints {
			if ep == st.served {
				name = st.pick.Engines[i]
			}
		}
		resp.GetResponseHeaders().Response.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			overwrite("x-ilb-engine", name), overwrite("x-ilb-snapshot-version", strconv.FormatUint(st.pick.Version, 10))}}
	}
	return st.send(resp)
}

func (st *stream) onResponseBody(b *extprocv3.HttpBody) error {
	if b.GetEndOfStream() {
		st.ended = true
	}
	return st.passBody(true, b)
}
