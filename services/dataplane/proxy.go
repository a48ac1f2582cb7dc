package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/services/internal/affinity"
)

// proxyRequest is what the proxy knows of an incoming request.
type proxyRequest struct {
	ep      endpoint
	cluster string
	key     affinity.Key
	model   string       // the body's "model", else the X-Ilb-Model header
	tokens  int          // estimated prompt tokens: body bytes / 4
	hash    uint64       // key.Hash, or a random hash when there is no key
	body    []byte       // the whole body, when it had to be read
	stream  *bodyReader  // the unread body, when the headers sufficed
	first   bytes.Reader // the first attempt's reader of body
	size    int64        // Content-Length of the incoming request
	ctx     context.Context
	span    trace.Span
	pending prefill // the attempt's prompt, pending at its engine until it answers
}

// replayable reports whether the body can be sent again for a retry.
func (in *proxyRequest) replayable() bool { return in.stream == nil || in.stream.n.Load() == 0 }

func (in *proxyRequest) reader() io.Reader {
	if in.stream != nil {
		return in.stream
	}
	return bytes.NewReader(in.body)
}

// bodyReader passes the incoming body through unbuffered, counts what was
// read, and ignores Close so the transport cannot close the server's body
// under a retry.
type bodyReader struct {
	r io.Reader
	n atomic.Int64 // atomic: the transport's write loop may still read after Do returns
}

func (b *bodyReader) Close() error { return nil }

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// serverSpan is the start option of the data plane's server spans, built
// once: an option built per request is an allocation per request.
var serverSpan = trace.WithSpanKind(trace.SpanKindServer)

// serveProxy returns the handler that proxies POST ep.path to the picked
// engine.
func (d *DataPlane) serveProxy(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !allow(w, r, http.MethodPost) {
			return
		}
		ctx := d.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := d.tracer.Start(ctx, "ilb.dataplane.route", serverSpan)
		defer span.End()
		in, code, err := d.readRequest(w, r, ep)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			writeError(w, code, err.Error())
			return
		}
		in.ctx, in.span = ctx, span
		d.route(w, r, in)
	}
}

// route runs the guardrails for a read request and forwards it.
func (d *DataPlane) route(w http.ResponseWriter, r *http.Request, in *proxyRequest) {
	c, code, err := d.requestCluster(in.cluster)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	if len(d.cfg.EngineURLs) == 0 {
		d.answerCode(w, c, http.StatusBadGateway, codeUpstream, "no engine URLs configured: this data plane only answers /v1/pick (give engines with --engine NAME=URL or --fleet)")
		return
	}
	p, err := c.cur.Load().forRequest(in.model, in.tokens)
	if err != nil {
		status, code, msg := modelError(err, d.cat.Load().models)
		in.span.SetStatus(codes.Error, msg)
		d.answerCode(w, c, status, code, msg)
		return
	}
	if in.span.IsRecording() { // attributes cost allocations: only for sampled spans
		in.span.SetAttributes(attribute.String("ilb.cluster", c.name), attribute.Int64("ilb.snapshot_version", int64(p.version)),
			attribute.String("ilb.key_source", in.key.Source.String()))
	}
	if p.err == nil && !c.throttle.admit(d.rand()) {
		c.throttled.Add(1)
		w.Header().Set("Retry-After", retryAfterSeconds(d.cfg.RetryAfter))
		d.answerCode(w, c, http.StatusServiceUnavailable, codeThrottled, "engines are rejecting requests; throttled locally, retry later")
		return
	}
	ch, ongoing, err := d.decideKey(c, p, in.hash, in.key.First, in.tokens)
	if err != nil {
		in.span.SetStatus(codes.Error, err.Error())
		d.answerPickError(w, c, err)
		return
	}
	c.keySources[in.key.Source].Add(1)
	c.budget.request()
	d.forward(w, r, c, p, in, ch, ongoing)
}

// readRequest finds the affinity key, the cluster, the model and the
// prompt's estimated length. When the headers give the key and the
// cluster (and the model, in a fleet of several models), the body is not
// parsed: it is read if it fits
// RetryBodyBytes (so that it can be retried) and streamed otherwise. Else
// it is read (at most MaxBodyBytes) and parsed for the user, cluster and
// prompt (affinity.ParseBody).
func (d *DataPlane) readRequest(w http.ResponseWriter, r *http.Request, ep endpoint) (*proxyRequest, int, error) {
	header, cl, hm := r.Header.Get(HeaderConversation), r.Header.Get(HeaderCluster), r.Header.Get(HeaderModel)
	in := &proxyRequest{ep: ep, cluster: cl, size: r.ContentLength}
	limited := http.MaxBytesReader(w, r.Body, d.cfg.MaxBodyBytes)
	if r.ContentLength > d.cfg.MaxBodyBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", d.cfg.MaxBodyBytes)
	}
	var b affinity.Body
	if header != "" && (cl != "" || d.single != nil) && (hm != "" || !d.cat.Load().multiModel()) {
		if err := d.bufferOrStream(in, limited, r.ContentLength); err != nil {
			return nil, bodyErrorCode(err), d.bodyError(err)
		}
	} else {
		body, err := readBody(limited, r.ContentLength)
		if err != nil {
			return nil, bodyErrorCode(err), d.bodyError(err)
		}
		if b, err = affinity.ParseBody(ep.kind, body, d.cfg.PromptAffinity); err != nil {
			return nil, http.StatusBadRequest, err
		}
		in.body, in.cluster, in.size = body, firstNonEmpty(cl, b.Cluster), int64(len(body))
	}
	in.model, in.tokens = firstNonEmpty(b.Model, hm), EstimatePromptTokens(in.size)
	in.key = affinity.Resolve(header, b)
	in.hash = in.key.Hash
	if in.key.Source == affinity.None {
		// No affinity key: any engine will do; a random hash spreads
		// such requests by the weights.
		in.hash = mix64(uint64(d.rand() * (1 << 53)))
	}
	return in, 0, nil
}

// bufferOrStream reads a header-routed body whole when it fits
// RetryBodyBytes, so that it can be sent again, and otherwise streams it
// to the engine: unread when its length says it is larger, else with the
// part read to find out put back in front.
func (d *DataPlane) bufferOrStream(in *proxyRequest, body io.Reader, length int64) error {
	if length > d.cfg.RetryBodyBytes {
		in.stream = &bodyReader{r: body}
		return nil
	}
	head, err := readBody(io.LimitReader(body, d.cfg.RetryBodyBytes+1), min(length, d.cfg.RetryBodyBytes))
	if err != nil {
		return err
	}
	if int64(len(head)) <= d.cfg.RetryBodyBytes {
		in.body, in.size = head, int64(len(head))
		return nil
	}
	in.stream = &bodyReader{r: io.MultiReader(bytes.NewReader(head), body)}
	return nil
}

// bodyErrorCode is the status of a failure to read the request body: 413
// over MaxBodyBytes, else 400.
func bodyErrorCode(err error) int {
	if tooLarge(err) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

func (d *DataPlane) bodyError(err error) error {
	if tooLarge(err) {
		return fmt.Errorf("request body over %d bytes", d.cfg.MaxBodyBytes)
	}
	return fmt.Errorf("reading the request body: %v", err)
}

// forward sends the request to the chosen engine, retrying on the next
// choice after a connection error or a 5xx while the retry budget allows
// and nothing was written to the client, then streams the answer back.
func (d *DataPlane) forward(w http.ResponseWriter, r *http.Request, c *cluster, p *picker, in *proxyRequest, ch choice, ongoing bool) {
	var tr tried
	for attempt := 0; ; attempt++ {
		s := &p.slots[ch.idx]
		c.inflight.Add(1)
		s.cell.inflight.Add(1)
		s.eng.live.own.Add(1)
		in.pending.start(c, s.eng, in.size)
		resp, err := d.send(in, r, s, attempt)
		next, retry := d.nextAttempt(c, p, in, ch, &tr, resp, err, attempt, ongoing)
		if !retry {
			d.respond(w, c, p, s, in, ch, resp, err, attempt)
		} else {
			discard(resp)
			in.span.AddEvent("retry", trace.WithAttributes(attribute.String("ilb.failed_engine", s.eng.name),
				attribute.String("ilb.next_engine", p.slots[next.idx].eng.name)))
		}
		in.pending.end()
		s.eng.live.own.Add(-1)
		s.cell.inflight.Add(-1)
		c.inflight.Add(-1)
		if !retry {
			return
		}
		ch = next
	}
}

// nextAttempt decides whether a failed attempt is retried, and where: the
// conversation's next choice among engines not tried yet, paid from the
// retry budget only when there is one.
func (d *DataPlane) nextAttempt(c *cluster, p *picker, in *proxyRequest, ch choice, tr *tried,
	resp *http.Response, err error, attempt int, ongoing bool) (choice, bool) {
	if !d.shouldRetry(c, resp, err, attempt, in) {
		return choice{}, false
	}
	tr.add(ch.idx)
	next, perr := p.pick(in.hash, ongoing, memo{}, tr)
	if perr != nil || !c.budget.tryRetry() {
		return choice{}, false
	}
	return next, true
}

// shouldRetry reports whether a failed attempt may be retried, counting
// the failures that are not only because the body was streamed away.
func (d *DataPlane) shouldRetry(c *cluster, resp *http.Response, err error, attempt int, in *proxyRequest) bool {
	if attempt >= d.cfg.MaxRetries || in.ctx.Err() != nil || tooLarge(err) || (err == nil && resp.StatusCode < 500) {
		return false
	}
	if !in.replayable() {
		c.unreplayable.Add(1)
		return false
	}
	return true
}

// tooLarge reports whether err is the incoming body exceeding its limit.
func tooLarge(err error) bool {
	if err == nil {
		return false
	}
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

func discard(resp *http.Response) {
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// respond writes the engine's answer (or a 502 when there is none) to the
// client, streaming the body and flushing each chunk of an event stream.
func (d *DataPlane) respond(w http.ResponseWriter, c *cluster, p *picker, s *slot, in *proxyRequest, ch choice, resp *http.Response, err error, retries int) {
	recording := in.span.IsRecording()
	if recording {
		in.span.SetAttributes(attribute.String("ilb.engine", s.eng.name), attribute.Int("ilb.retries", retries))
	}
	if recording && ch.reason != noFallback {
		in.span.SetAttributes(attribute.String("ilb.fallback", ch.reason.String()))
	}
	if err != nil {
		if in.ctx.Err() != nil {
			return // the client is gone; nobody to answer
		}
		if tooLarge(err) {
			d.answer(w, c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", d.cfg.MaxBodyBytes))
			return
		}
		c.throttle.outcome(false)
		in.span.SetStatus(codes.Error, err.Error())
		d.answerCode(w, c, http.StatusBadGateway, codeUpstream, fmt.Sprintf("engine %s: %v", s.eng.name, err))
		return
	}
	defer resp.Body.Close()
	c.throttle.outcome(resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable)
	h := w.Header()
	forwardHeaders(h, resp.Header)
	h[HeaderEngine], h[HeaderVersion] = s.eng.nameHeader, p.versionHeader
	c.countCode(resp.StatusCode)
	if recording {
		in.span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	}
	w.WriteHeader(resp.StatusCode)
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.ContentLength < 0
	if err := copyBody(w, resp.Body, stream, in.pending.done); err != nil && in.ctx.Err() == nil {
		in.span.SetStatus(codes.Error, "copying the response: "+err.Error())
		d.log.Debug("response copy ended early", "engine", s.eng.name, "err", err)
	}
}
