package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The proxy's load harness: a streaming engine on loopback, the data
// plane's HTTP server in front of it, and closed-loop clients that time
// each request's first body byte (the first token a user sees) directly
// against the engine and through the data plane. Bounded in count and in
// time; loopback only.

// streamEngine answers every POST with chunks server-sent events, the
// first at once and the rest gap apart, then [DONE].
func streamEngine(t testing.TB, chunks int, gap time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(streamHandler(chunks, gap))
	srv.Config.MaxHeaderBytes = 1 << 16
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// streamHandler is streamEngine's handler.
func streamHandler(chunks int, gap time.Duration) http.Handler {
	event := []byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}` + "\n\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range chunks {
			if i > 0 && gap > 0 {
				time.Sleep(gap)
			}
			_, _ = w.Write(event)
			_ = rc.Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
}

// proxyServer serves d's handler on loopback.
func proxyServer(t testing.TB, d *DataPlane) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// loadPlane is a data plane for fe-a whose one engine is url.
func loadPlane(t testing.TB, url string) *DataPlane {
	t.Helper()
	cfg := testConfig("fe-a")
	cfg.EngineURLs = map[string]string{"eng-a": url}
	d := newDP(t, cfg, Deps{})
	mustSet(t, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	return d
}

// loadClient keeps one connection per worker alive, as a gateway does.
func loadClient(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conc + 16,
		MaxIdleConnsPerHost: conc + 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// loadSpec is one closed-loop run.
type loadSpec struct {
	url      string // base URL: the engine's or the data plane's
	conc     int    // concurrent streams
	requests int    // in all
	header   bool   // send X-Conversation-Id (the data plane then skips parsing the body)
	deadline time.Duration
}

// loadResult has every request's time to first body byte.
type loadResult struct {
	ttfb   []time.Duration
	errors int64
	bytes  int64
	wall   time.Duration
}

// loadBody is a typical request: a system prompt and a user message.
func loadBody(i int) []byte {
	return []byte(fmt.Sprintf(`{"model":"llama-3-70b","stream":true,"max_tokens":64,"messages":[`+
		`{"role":"system","content":"You are a helpful assistant. Answer in one short paragraph."},`+
		`{"role":"user","content":"Question %d: explain how a paged KV cache lets an inference engine batch many requests."}]}`, i))
}

// runLoad sends spec.requests streaming chats, spec.conc at a time, and
// reads every answer to the end.
func runLoad(ctx context.Context, client *http.Client, spec loadSpec) loadResult {
	ctx, cancel := context.WithTimeout(ctx, spec.deadline)
	defer cancel()
	var next atomic.Int64
	res := loadResult{ttfb: make([]time.Duration, 0, spec.requests)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range spec.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				i := int(next.Add(1)) - 1
				if i >= spec.requests || ctx.Err() != nil {
					return
				}
				d, n, err := oneStream(ctx, client, spec, i, buf)
				mu.Lock()
				if err != nil {
					res.errors++
				} else {
					res.ttfb = append(res.ttfb, d)
					res.bytes += n
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

func oneStream(ctx context.Context, client *http.Client, spec loadSpec, i int, buf []byte) (time.Duration, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.url+"/v1/chat/completions", bytes.NewReader(loadBody(i)))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if spec.header {
		req.Header.Set(HeaderConversation, "conv-"+strconv.Itoa(i))
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	n, err := resp.Body.Read(buf)
	ttfb := time.Since(start)
	if err != nil && err != io.EOF {
		return 0, 0, err
	}
	rest, err := io.CopyBuffer(io.Discard, resp.Body, buf)
	return ttfb, int64(n) + rest, err
}

// percentile of sorted durations, p in [0, 1].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// TestProxyLoadSmoke runs the harness briefly, directly and through the
// data plane, and checks that every stream arrives whole: the benchmark
// below measures nothing if the harness is broken.
func TestProxyLoadSmoke(t *testing.T) {
	eng := streamEngine(t, 4, 0)
	proxy := proxyServer(t, loadPlane(t, eng.URL))
	client := loadClient(20)
	defer client.CloseIdleConnections()
	for _, spec := range []loadSpec{
		{url: eng.URL, conc: 20, requests: 200, deadline: 20 * time.Second},
		{url: proxy.URL, conc: 20, requests: 200, deadline: 20 * time.Second},
		{url: proxy.URL, conc: 20, requests: 200, header: true, deadline: 20 * time.Second},
	} {
		res := runLoad(context.Background(), client, spec)
		if res.errors != 0 || len(res.ttfb) != spec.requests {
			t.Fatalf("%s (header %v): %d errors, %d of %d answered", spec.url, spec.header, res.errors, len(res.ttfb), spec.requests)
		}
		if want := int64(spec.requests) * int64(4*len(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}`+"\n\n")+len("data: [DONE]\n\n")); res.bytes != want {
			t.Fatalf("%s: %d bytes streamed, want %d", spec.url, res.bytes, want)
		}
	}
}

// BenchmarkProxyStream measures what the data plane adds to a streaming
// request's time to first byte: each run sends b.N requests through the
// data plane, conc at a time, after as many sent directly to the engine
// at the same concurrency (untimed), and reports both p50 and p99 and
// their differences (added-p50-µs, added-p99-µs: difference of the
// percentiles). The engine streams 8 events, gap apart, so that conc
// streams are open at once at an event rate a 2-core machine can carry
// for client, engine and data plane together (a real generation lasts
// seconds): 1 stream with 2 ms gaps, 100 with 50 ms (a token every 50 ms,
// 250 requests/s), 1,000 with 250 ms (500 requests/s). Client, data
// plane and engine share the machine's cores, so the figures include
// their contention, and that of whatever else runs there.
func BenchmarkProxyStream(b *testing.B) { runProxyCases(b, benchProxyStream) }

// runProxyCases runs bench for each of the proxy benchmarks' cases (above)
// as sub-benchmark conc=N/key=prompt|header: N streams open at once, an
// event every gap, the key from the prompt or from a header.
func runProxyCases(b *testing.B, bench func(b *testing.B, conc int, gap time.Duration, header bool)) {
	for _, c := range []struct {
		conc   int
		gap    time.Duration
		header bool
	}{{1, 2 * time.Millisecond, false}, {100, 50 * time.Millisecond, false}, {100, 50 * time.Millisecond, true},
		{1000, 250 * time.Millisecond, false}} {
		key := "prompt"
		if c.header {
			key = "header"
		}
		b.Run(fmt.Sprintf("conc=%d/key=%s", c.conc, key), func(b *testing.B) { bench(b, c.conc, c.gap, c.header) })
	}
}

func benchProxyStream(b *testing.B, conc int, gap time.Duration, header bool) {
	eng := streamEngine(b, 8, gap)
	probe := &inProcess{}
	cfg := testConfig("fe-a")
	cfg.EngineURLs = map[string]string{"eng-a": eng.URL}
	d := newDP(b, cfg, Deps{Transport: probe.transport(newTransport(cfg))})
	mustSet(b, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
	proxy := httptest.NewServer(probe.handler(d.Handler()))
	b.Cleanup(proxy.Close)
	client := loadClient(conc)
	defer client.CloseIdleConnections()
	n := max(b.N, conc)
	ctx := context.Background()
	warm := loadSpec{url: proxy.URL, conc: conc, requests: conc, header: header, deadline: time.Minute}
	runLoad(ctx, client, warm) // connections up on both hops
	warm.url = eng.URL
	runLoad(ctx, client, warm)
	probe.reset()
	direct := runLoad(ctx, client, loadSpec{url: eng.URL, conc: conc, requests: n, header: header, deadline: 2 * time.Minute})
	b.ReportAllocs()
	b.ResetTimer()
	proxied := runLoad(ctx, client, loadSpec{url: proxy.URL, conc: conc, requests: n, header: header, deadline: 2 * time.Minute})
	b.StopTimer()
	if direct.errors+proxied.errors > 0 {
		b.Fatalf("%d direct and %d proxied errors", direct.errors, proxied.errors)
	}
	slices.Sort(direct.ttfb)
	slices.Sort(proxied.ttfb)
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		dq, pq := percentile(direct.ttfb, q.p), percentile(proxied.ttfb, q.p)
		b.ReportMetric(float64(dq.Microseconds()), "direct-"+q.name+"-µs")
		b.ReportMetric(float64(pq.Microseconds()), "proxied-"+q.name+"-µs")
		b.ReportMetric(float64((pq - dq).Microseconds()), "added-"+q.name+"-µs")
	}
	_, _, own := probe.sorted()
	b.ReportMetric(float64(percentile(own, 0.5).Microseconds()), "inproc-p50-µs")
	b.ReportMetric(float64(percentile(own, 0.99).Microseconds()), "inproc-p99-µs")
	b.ReportMetric(float64(len(proxied.ttfb))/proxied.wall.Seconds(), "req/s")
}

// inProcess measures the data plane's own share of a request's time to
// first byte, in two parts timed inside the data plane: in, from the
// handler's start to the upstream request written to the engine's
// connection (reading and parsing the request, the pick, building and
// writing the upstream request), and out, from the engine's first byte
// read by the transport to the first write to the client flushed
// (parsing the engine's headers, writing ours and the first event). own
// is their sum: the data plane's work and its waits for a CPU, without
// the network hops and the engine.
type inProcess struct {
	mu           sync.Mutex
	in, out, own []time.Duration
}

type probeKey struct{}

// probeTimes are one request's marks, as nanoseconds since probeBase
// (monotonic): the transport's write loop and read loop set theirs on
// their own goroutines.
type probeTimes struct {
	start, wrote, firstByte, first atomic.Int64
}

var probeBase = time.Now()

func probeNow() int64 { return int64(time.Since(probeBase)) }

func (p *inProcess) reset() {
	p.mu.Lock()
	p.in, p.out, p.own = p.in[:0], p.out[:0], p.own[:0]
	p.mu.Unlock()
}

// sorted returns the three parts, each sorted.
func (p *inProcess) sorted() (in, out, own []time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in, out, own = slices.Clone(p.in), slices.Clone(p.out), slices.Clone(p.own)
	slices.Sort(in)
	slices.Sort(out)
	slices.Sort(own)
	return in, out, own
}

func (p *inProcess) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := &probeTimes{}
		t.start.Store(probeNow())
		fw := &firstWrite{ResponseWriter: w, t: t}
		h.ServeHTTP(fw, r.WithContext(context.WithValue(r.Context(), probeKey{}, t)))
		if fw.written && t.first.Load() == 0 {
			t.first.Store(probeNow()) // one read held the whole answer: the server writes it now
		}
		start, wrote, firstByte, first := t.start.Load(), t.wrote.Load(), t.firstByte.Load(), t.first.Load()
		if wrote == 0 || firstByte == 0 || first == 0 {
			return // not proxied, or no answer
		}
		in, out := time.Duration(wrote-start), time.Duration(first-firstByte)
		p.mu.Lock()
		p.in, p.out, p.own = append(p.in, in), append(p.out, out), append(p.own, in+out)
		p.mu.Unlock()
	})
}

func (p *inProcess) transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t, _ := r.Context().Value(probeKey{}).(*probeTimes)
		if t == nil {
			return rt.RoundTrip(r)
		}
		t.wrote.Store(0) // a retry: time the last attempt
		t.firstByte.Store(0)
		tr := &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { t.wrote.Store(probeNow()) },
			GotFirstResponseByte: func() { t.firstByte.Store(probeNow()) },
		}
		return rt.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), tr)))
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// firstWrite notes when the first write to the client is flushed.
type firstWrite struct {
	http.ResponseWriter
	t       *probeTimes
	written bool
}

func (f *firstWrite) Write(b []byte) (int, error) {
	f.written = true
	return f.ResponseWriter.Write(b)
}

func (f *firstWrite) Flush() {
	f.ResponseWriter.(http.Flusher).Flush()
	if f.written && f.t.first.Load() == 0 {
		f.t.first.Store(probeNow())
	}
}

// cannedEngine is an in-memory engine for measuring the data plane's own
// work per request: it answers every request with the same event stream.
type cannedEngine struct{ body []byte }

func (c cannedEngine) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Request: r, ContentLength: -1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(c.body))}, nil
}

// BenchmarkProxyHandler is the data plane's own cost per proxied
// streaming request, with no network: the handler reads the request,
// derives the key (key=prompt) or takes it from the header, picks,
// builds the upstream request, copies an 8-event stream back and
// flushes each read. Allocations here are the data plane's alone.
func BenchmarkProxyHandler(b *testing.B) {
	event := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}` + "\n\n"
	canned := cannedEngine{body: []byte(strings.Repeat(event, 8) + "data: [DONE]\n\n")}
	for _, header := range []bool{false, true} {
		name := "key=prompt"
		if header {
			name = "key=header"
		}
		b.Run(name, func(b *testing.B) {
			cfg := testConfig("fe-a")
			cfg.EngineURLs = map[string]string{"eng-a": "http://engine.invalid"}
			d := newDP(b, cfg, Deps{Transport: canned})
			mustSet(b, d, snap("fe-a", 1, map[string]float64{"eng-a": 1}))
			h := d.Handler()
			bodies := make([][]byte, 1024)
			for i := range bodies {
				bodies[i] = loadBody(i)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(bodies[i&1023]))
				if header {
					req.Header.Set(HeaderConversation, "conv-"+strconv.Itoa(i&1023))
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 || rec.Body.Len() != len(canned.body) {
					b.Fatalf("%d %d bytes", rec.Code, rec.Body.Len())
				}
			}
		})
	}
}
