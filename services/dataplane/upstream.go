package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/propagation"
)

// The request to the engine and the answer back, written for the hot
// path: the upstream request is built from pre-parsed URLs and sent with
// the transport itself (no http.Client: no redirect bookkeeping, no
// header copies for it), headers are forwarded by sharing their value
// slices (neither side changes them), and the answer is copied through a
// pooled buffer and flushed after every read when it is a stream.

// send makes one attempt and records its outcome for outlier detection.
func (d *DataPlane) send(in *proxyRequest, r *http.Request, s *slot, attempt int) (*http.Response, error) {
	u := s.eng.addr.Load().parsed[in.ep.kind]
	if u == nil {
		return nil, errors.New("no URL configured for it (give one with --engine or the fleet file)")
	}
	s.eng.live.sent.Add(1)
	hdr := make(http.Header, len(r.Header)+2)
	forwardHeaders(hdr, r.Header)
	d.prop.Inject(in.ctx, propagation.HeaderCarrier(hdr))
	body, size := in.upstreamBody(attempt)
	req := (&http.Request{Method: http.MethodPost, URL: u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hdr, Body: body, ContentLength: size}).WithContext(in.ctx)
	start := d.now()
	resp, err := d.transport.RoundTrip(req)
	if err != nil {
		err = fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	if in.ctx.Err() != nil || tooLarge(err) { // the client's doing, not the engine's
		return resp, err
	}
	failed := err != nil || resp.StatusCode >= 500
	if s.eng.observe(failed, d.now().Sub(start), d.cfg.Outlier.Consecutive5xx) {
		d.wake()
	}
	return resp, err
}

// upstreamBody is the body of one attempt and its length (-1: unknown).
// A read body is sent from a fresh reader per attempt: the transport's
// write loop of a failed attempt may still be reading the previous one.
// The reader is a *bytes.Reader behind io.NopCloser (Close does nothing),
// which net/http knows to be in memory: it then writes the request's
// headers and body in one write to the engine's connection, where any
// other reader costs a second write (a flush of the headers first).
func (in *proxyRequest) upstreamBody(attempt int) (io.ReadCloser, int64) {
	if in.stream != nil {
		return in.stream, in.size
	}
	if len(in.body) == 0 {
		return http.NoBody, 0
	}
	if attempt == 0 {
		in.first.Reset(in.body)
		return io.NopCloser(&in.first), int64(len(in.body))
	}
	return io.NopCloser(bytes.NewReader(in.body)), int64(len(in.body))
}

// readBody reads a request body whole: in one allocation of the right
// size when its length is known, else growing as io.ReadAll does.
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length < 0 || length > 64<<20 {
		return io.ReadAll(r)
	}
	b := make([]byte, length+1) // +1: see the end without a second read
	n, err := io.ReadFull(r, b)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return b[:n], nil // shorter than announced: the server reports that
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r) // longer than announced
	return append(b, rest...), err
}

// hopHeaders are not forwarded (RFC 9110, section 7.6.1).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// forwardHeaders sets dst's end-to-end headers from src, sharing the value
// slices: net/http neither changes a request's nor a response's header
// values once they are built, and Set replaces a slice rather than
// writing into it.
func forwardHeaders(dst, src http.Header) {
	for k, vs := range src {
		if !hopHeaders[k] {
			dst[k] = vs
		}
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody copies body to w, flushing after every read when stream is
// set, so server-sent events reach the client chunk by chunk. first is
// called when the first bytes arrive (a streamed answer's first token).
func copyBody(w http.ResponseWriter, body io.Reader, stream bool, first func()) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	flush := flusher(w)
	for {
		n, err := body.Read(*bp)
		if n > 0 {
			first()
			if _, werr := w.Write((*bp)[:n]); werr != nil {
				return werr
			}
			if stream && err == nil {
				_ = flush() // at the end the server's own finish writes it with the final chunk: one write less
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// flusher returns w's Flush: directly when w has one (the server's own
// writer), else through a ResponseController (writers that wrap it).
func flusher(w http.ResponseWriter) func() error {
	if f, ok := w.(http.Flusher); ok {
		return func() error { f.Flush(); return nil }
	}
	return http.NewResponseController(w).Flush
}
