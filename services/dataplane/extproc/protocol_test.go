package extproc

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/ilb-router/ilb/schemas"
)

// TestHeadersOnly: a request without a body is decided on its headers:
// the pick the data plane makes for the conversation, then the two
// fallbacks, in the header and in envoy.lb; the response path names the
// engine and the stream ends cleanly.
func TestHeadersOnly(t *testing.T) {
	f := newFixture(t, nil)
	want := pickOf(t, f.d, "conv-1")
	st := f.open(t)
	mustSend(t, st, chatHeaders(true, "x-conversation-id", "conv-1"))
	resp := mustRecv(t, st)
	rh := resp.GetRequestHeaders()
	if rh == nil {
		t.Fatalf("first answer %v, want a request headers response", resp)
	}
	dest := destination(t, rh.GetResponse(), resp.GetDynamicMetadata())
	if len(dest) != 3 || dest[0] != want || len(slicesCompact(dest)) != 3 {
		t.Fatalf("destination %v: want %s first, then two other fallbacks", dest, want)
	}
	mustSend(t, st, responseHeaders("200", want))
	resp = mustRecv(t, st)
	var engine string
	for _, h := range resp.GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if h.GetHeader().GetKey() == "x-ilb-engine" {
			engine = string(h.GetHeader().GetRawValue())
		}
	}
	if engines[engine] != want {
		t.Fatalf("x-ilb-engine %q, want the engine at %s", engine, want)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after the request: %v, want EOF", err)
	}
	if got := f.s.counts.decisions[onHeaders].Load(); got != 1 {
		t.Fatalf("%d header decisions, want 1", got)
	}
}

// endRequest plays the response path (200 from served) and closes the
// stream, as Envoy does when the response is complete.
func endRequest(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient, served string) {
	t.Helper()
	mustSend(t, st, responseHeaders("200", served))
	if resp := mustRecv(t, st); resp.GetResponseHeaders() == nil {
		t.Fatalf("response headers answered with %v", resp)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after the response: %v, want EOF", err)
	}
}

func slicesCompact(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

// TestHeaderDecisionStreamsBodyBack: the key and cluster are in the
// headers, so the pick is sent at once and every body chunk is streamed
// back as it arrives (FULL_DUPLEX_STREAMED).
func TestHeaderDecisionStreamsBodyBack(t *testing.T) {
	f := newFixture(t, nil)
	st := f.open(t)
	mustSend(t, st, chatHeaders(false, "x-conversation-id", "conv-2", "x-ilb-cluster", "fe-a"))
	resp := mustRecv(t, st)
	if dest := destination(t, resp.GetRequestHeaders().GetResponse(), resp.GetDynamicMetadata()); dest[0] != pickOf(t, f.d, "conv-2") {
		t.Fatalf("destination %v", dest)
	}
	for i, chunk := range []string{`{"model":"m",`, `"messages":[]}`} {
		mustSend(t, st, body(chunk, i == 1))
		sr := mustRecv(t, st).GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if string(sr.GetBody()) != chunk || sr.GetEndOfStream() != (i == 1) {
			t.Fatalf("chunk %d came back as %q eos %v", i, sr.GetBody(), sr.GetEndOfStream())
		}
	}
}

// TestBodyDecisionInChunks: without a key in the headers, the picker
// buffers the body (sent in several chunks, larger than one streamed
// chunk), derives the key from the prompt as the HTTP proxy does, sends
// the deferred headers response, then the body back in chunks of at most
// MaxChunkBytes with end of stream on the last.
func TestBodyDecisionInChunks(t *testing.T) {
	f := newFixture(t, nil)
	content := strings.Repeat("long context ", 8000) // about 100 KB
	raw, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{
		{"role": "system", "content": "be brief"}, {"role": "user", "content": content}}})
	first := ""
	for round := range 2 { // the same conversation twice: the same engine
		st := f.open(t)
		mustSend(t, st, chatHeaders(false))
		parts := []string{string(raw[:10]), string(raw[10:40000]), string(raw[40000:])}
		for i, p := range parts {
			mustSend(t, st, body(p, i == len(parts)-1))
		}
		resp := mustRecv(t, st)
		if resp.GetRequestHeaders() == nil {
			t.Fatalf("first answer %v, want the deferred request headers response", resp)
		}
		dest := destination(t, resp.GetRequestHeaders().GetResponse(), resp.GetDynamicMetadata())
		if round == 0 {
			first = dest[0]
		} else if dest[0] != first {
			t.Fatalf("the same prompt went to %s, then %s", first, dest[0])
		}
		var back []byte
		for {
			sr := mustRecv(t, st).GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
			if sr == nil || len(sr.GetBody()) > MaxChunkBytes {
				t.Fatalf("want streamed chunks of at most %d bytes, got %v", MaxChunkBytes, sr)
			}
			back = append(back, sr.GetBody()...)
			if sr.GetEndOfStream() {
				break
			}
		}
		if string(back) != string(raw) {
			t.Fatalf("the body came back as %d bytes, want the %d sent", len(back), len(raw))
		}
		endRequest(t, st, dest[0])
	}
	if got := f.s.counts.decisions[onBody].Load(); got != 2 {
		t.Fatalf("%d body decisions, want 2", got)
	}
}

// TestBufferedMode: with request_body_mode BUFFERED the headers are let
// through and the pick rides on the body response.
func TestBufferedMode(t *testing.T) {
	f := newFixture(t, nil)
	st := f.open(t)
	mustSend(t, st, withMode(chatHeaders(false), filterv3.ProcessingMode_BUFFERED))
	if resp := mustRecv(t, st); resp.GetRequestHeaders() == nil || resp.GetRequestHeaders().GetResponse().GetHeaderMutation() != nil {
		t.Fatalf("headers answer %v, want a plain continue", resp)
	}
	mustSend(t, st, body(`{"model":"m","user":"alice","messages":[{"role":"user","content":"hi"}]}`, true))
	resp := mustRecv(t, st)
	if dest := destination(t, resp.GetRequestBody().GetResponse(), resp.GetDynamicMetadata()); dest[0] != pickOf(t, f.d, "alice") {
		t.Fatalf("destination %v, want the user's engine first", dest)
	}
}

// TestSubsetHint: the pick and its fallbacks stay inside the gateway's
// subset; a subset of unknown endpoints leaves nothing eligible (503).
func TestSubsetHint(t *testing.T) {
	f := newFixture(t, nil)
	for conv := range 20 {
		st := f.open(t)
		mustSend(t, st, withSubset(chatHeaders(true, "x-conversation-id", "c"+string(rune('a'+conv))), engines["eng-b"], "10.9.9.9:8000"))
		resp := mustRecv(t, st)
		if dest := destination(t, resp.GetRequestHeaders().GetResponse(), resp.GetDynamicMetadata()); len(dest) != 1 || dest[0] != engines["eng-b"] {
			t.Fatalf("subset {eng-b, unknown}: destination %v", dest)
		}
	}
	st := f.open(t)
	mustSend(t, st, withSubset(chatHeaders(true, "x-conversation-id", "c"), "10.9.9.9:8000"))
	checkImmediate(t, mustRecv(t, st), 503, "no_engine_available")
	if got := f.s.counts.errors[reasonUnknownSubset].Load(); got != 20 {
		t.Fatalf("unknown subset counted %d times, want 20 (the 503 is counted as an immediate answer)", got)
	}
}

// checkImmediate checks an ImmediateResponse: status, OpenAI envelope.
func checkImmediate(t *testing.T, resp *extprocv3.ProcessingResponse, status int, code string) {
	t.Helper()
	ir := resp.GetImmediateResponse()
	if ir == nil || int(ir.GetStatus().GetCode()) != status {
		t.Fatalf("answer %v, want ImmediateResponse %d", resp, status)
	}
	var env struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal(ir.GetBody(), &env); err != nil || env.Error.Code != code || env.Error.Message == "" {
		t.Fatalf("body %s (%v), want OpenAI's envelope with code %s", ir.GetBody(), err, code)
	}
}

// TestShedAndNoEngine: shedding answers 429 with Retry-After, every
// engine down answers 503, and so does a data plane with no snapshot.
func TestShedAndNoEngine(t *testing.T) {
	f := newFixture(t, nil)
	setSnapshot(t, f.d, 2, 1)
	st := f.open(t)
	mustSend(t, st, chatHeaders(true, "x-conversation-id", "conv-3"))
	resp := mustRecv(t, st)
	checkImmediate(t, resp, 429, "rate_limit_exceeded")
	retry := ""
	for _, h := range resp.GetImmediateResponse().GetHeaders().GetSetHeaders() {
		if h.GetHeader().GetKey() == "retry-after" {
			retry = string(h.GetHeader().GetRawValue())
		}
	}
	if retry != "1" {
		t.Fatalf("Retry-After %q, want 1", retry)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after an immediate response: %v, want the stream closed", err)
	}
	setSnapshot(t, f.d, 3, 0)
	for name := range engines {
		f.d.ObserveStatus(schemas.EngineStatus{Engine: name, TimeUnixNano: 1, Health: schemas.HealthUnhealthy, ReadyReplicas: 1})
	}
	st = f.open(t)
	mustSend(t, st, chatHeaders(false), body(`{"messages":[{"role":"user","content":"x"}]}`, true))
	checkImmediate(t, mustRecv(t, st), 503, "no_engine_available")
	if f.s.counts.immediateAt(429).Load() != 1 || f.s.counts.immediateAt(503).Load() != 1 {
		t.Fatalf("immediate answers not counted")
	}
}

func TestNoSnapshot(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	d := newPlane(t)
	s, err := New(cfg, Deps{Plane: d})
	if err != nil {
		t.Fatal(err)
	}
	st, err := extprocv3.NewExternalProcessorClient(serve(t, s)).Process(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, chatHeaders(true, "x-conversation-id", "c"))
	checkImmediate(t, mustRecv(t, st), 503, "no_snapshot")
}
