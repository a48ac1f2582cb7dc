package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// fakePlane stands in for a data plane and its engines: it checks what
// the generator sends and answers like ilb's data plane would.
type fakePlane struct {
	firstByte time.Duration // before headers and the first token
	rest      time.Duration // before the remaining tokens
	shed      map[string]bool
	block     chan struct{} // when set, every request waits on it

	mu         sync.Mutex
	last       map[string][]message // conversation -> its last request's messages + reply
	violations []string
	requests   map[string]int // by cluster
	prompt     int
	cached     int
}

func newFakePlane() *fakePlane {
	return &fakePlane{firstByte: 100 * time.Millisecond, rest: 50 * time.Millisecond, shed: map[string]bool{},
		last: map[string][]message{}, requests: map[string]int{}}
}

func (f *fakePlane) violate(format string, a ...any) {
	f.mu.Lock()
	f.violations = append(f.violations, fmt.Sprintf(format, a...))
	f.mu.Unlock()
}

func (f *fakePlane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.violate("bad body: %v", err)
		http.Error(w, "bad", 400)
		return
	}
	cluster, conv := r.Header.Get(HeaderCluster), r.Header.Get(HeaderConversation)
	if r.URL.Path != "/v1/chat/completions" || cluster == "" || conv == "" || req.User != conv {
		f.violate("path %s cluster %q conversation %q user %q", r.URL.Path, cluster, conv, req.User)
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-r.Context().Done():
			return
		}
	}
	reply := f.check(cluster, conv, req.Messages)
	if !sleepCtx(r, f.firstByte) {
		return
	}
	if f.shed[cluster] {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"shed"}`, http.StatusTooManyRequests)
		return
	}
	f.answer(w, r, &req, conv, reply)
}

// sleepCtx sleeps d unless the request is cancelled first.
func sleepCtx(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// check verifies the turn repeats the conversation so far verbatim and
// returns this turn's reply.
func (f *fakePlane) check(cluster, conv string, msgs []message) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[cluster]++
	prev := f.last[conv]
	n := len(msgs)
	extends := n == 2 && prev == nil || n == len(prev)+1 && slices.Equal(msgs[:n-1], prev)
	if !extends || msgs[0].Role != "system" || msgs[n-1].Role != "user" {
		f.violations = append(f.violations, fmt.Sprintf("conversation %s: turn does not extend the previous one (%d messages after %d)", conv, n, len(prev)))
	}
	reply := fmt.Sprintf("reply %d of %s", n/2, conv)
	f.last[conv] = append(slices.Clone(msgs), message{Role: "assistant", Content: reply})
	return reply
}

func engineOf(conv string) string {
	h := fnv.New32a()
	io.WriteString(h, conv)
	return fmt.Sprintf("eng-%d", h.Sum32()%3)
}

func (f *fakePlane) answer(w http.ResponseWriter, r *http.Request, req *chatRequest, conv, reply string) {
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Content) / bytesPerToken
	}
	cached := prompt / 2
	// Usage is counted when the answer is complete, as the client counts it.
	count := func() {
		f.mu.Lock()
		f.prompt += prompt
		f.cached += cached
		f.mu.Unlock()
	}
	w.Header().Set(headerEngine, engineOf(conv))
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		prompt, req.MaxTokens, cached)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		if !sleepCtx(r, f.rest) {
			return
		}
		count()
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q}}],"usage":%s}`, reply, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	half := len(reply) / 2
	fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":%q}}]}\n\n", reply[:half])
	w.(http.Flusher).Flush()
	if !sleepCtx(r, f.rest) {
		return
	}
	count()
	fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n: a comment\n\n", reply[half:])
	fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n")
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", usage)
}

// pipeTransport runs a handler in process and streams its response
// through a pipe, so that the client sees the first bytes when the handler
// flushes them: no sockets, so tests can run in a synctest bubble.
type pipeTransport struct{ h http.Handler }

func (t pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		t.h.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	stop := context.AfterFunc(req.Context(), func() { pr.CloseWithError(req.Context().Err()) })
	return &http.Response{StatusCode: w.code, Header: w.header, Body: body{pr, stop}, Request: req}, nil
}

// body fails reads once the request's context ends, as a real transport
// does.
type body struct {
	pr   *io.PipeReader
	stop func() bool
}

func (b body) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b body) Close() error {
	b.stop()
	return b.pr.Close()
}

type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	code   int
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.header = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

func (w *pipeWriter) Flush() {}
