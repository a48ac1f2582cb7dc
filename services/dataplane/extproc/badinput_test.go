package extproc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// rawCodec sends bytes as they are: a gateway gone wrong.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

// TestGarbageFrame: bytes that are not a ProcessingRequest end the stream
// with gRPC's own status for them (Internal, "failed to unmarshal") and
// a counter; the server keeps serving.
func TestGarbageFrame(t *testing.T) {
	f := newFixture(t, nil)
	desc := &grpc.StreamDesc{StreamName: "Process", ServerStreams: true, ClientStreams: true}
	cs, err := f.conn.NewStream(t.Context(), desc, "/envoy.service.ext_proc.v3.ExternalProcessor/Process", grpc.ForceCodecV2(nil), grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x01}
	if err := cs.SendMsg(&garbage); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := cs.RecvMsg(&out); status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "unmarshal") {
		t.Fatalf("garbage frame: %v, want Internal: failed to unmarshal", err)
	}
	// gRPC answers before the handler sees the error: wait for the count.
	waitFor(t, "the bad frame's count", func() bool { return f.s.counts.errors[reasonBadFrame].Load() == 1 })
	st := f.open(t) // still serving
	mustSend(t, st, chatHeaders(true, "x-conversation-id", "after"))
	picked(t, mustRecv(t, st))
}

// TestProtocolErrors: messages out of order end the stream with
// InvalidArgument, never a panic.
func TestProtocolErrors(t *testing.T) {
	f := newFixture(t, nil)
	for name, msgs := range map[string][]*extprocv3.ProcessingRequest{
		"body before headers":     {body("{}", true)},
		"trailers before headers": {{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{}}}},
		"headers twice":           {chatHeaders(false), chatHeaders(false)},
		"empty message":           {{}},
	} {
		st := f.open(t)
		mustSend(t, st, msgs...)
		if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if got := f.s.counts.errors[reasonProtocol].Load(); got != 4 {
		t.Fatalf("%d protocol errors counted, want 4", got)
	}
}

// TestBodyOverLimit: a body over MaxBodyBytes is answered 413 and counted.
func TestBodyOverLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxBodyBytes = 100 })
	st := f.open(t)
	mustSend(t, st, chatHeaders(false), body(strings.Repeat("x", 60), false), body(strings.Repeat("y", 60), false))
	checkImmediate(t, mustRecv(t, st), 413, "request_too_large")
	if f.s.counts.errors[reasonBodyTooLarge].Load() != 1 {
		t.Fatal("body over the limit not counted")
	}
	st = f.open(t)
	mustSend(t, st, chatHeaders(false), body(`{"messages": not json`, true))
	checkImmediate(t, mustRecv(t, st), 400, "invalid_request")
}

// inFlight is the data plane's in-flight count for fe-a, from
// /v1/routing.
func inFlight(t *testing.T, f *fixture) int64 {
	t.Helper()
	rec := httptest.NewRecorder()
	f.d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/routing?cluster=fe-a", nil))
	var info struct {
		Engines []struct {
			InFlight int64 `json:"in_flight"`
		} `json:"engines"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	for _, e := range info.Engines {
		n += e.InFlight
	}
	return n
}

// TestClientGoneMidStream: a gateway that disappears mid-request releases
// the pick's in-flight count and leaks no goroutine (TestMain's goleak).
func TestClientGoneMidStream(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := extprocv3.NewExternalProcessorClient(f.conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, chatHeaders(false, "x-conversation-id", "gone"))
	mustRecv(t, st) // picked: one request in flight
	if got := inFlight(t, f); got != 1 {
		t.Fatalf("in flight %d after the pick, want 1", got)
	}
	mustSend(t, st, body(`{"a":`, false))
	mustRecv(t, st)
	cancel()
	waitFor(t, "the pick released and the client-gone count", func() bool {
		return inFlight(t, f) == 0 && f.s.counts.errors[reasonClientGone].Load() == 1
	})
}

// TestServedFeedsOutlierDetection: failures the gateway reports for the
// served endpoint eject that engine, as failures of proxied requests do.
// (500s: a 503 would also trip client-side throttling, which answers 503
// before outlier detection has a say.)
func TestServedFeedsOutlierDetection(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	bad := engines["eng-c"]
	for i := range 5 {
		st := f.open(t)
		mustSend(t, st, withSubset(chatHeaders(true, "x-conversation-id", "k"+string(rune('a'+i))), bad))
		picked(t, mustRecv(t, st))
		endRequestStatus(t, st, "500", bad)
	}
	// The owner ejects on its next turn; a success reported before that
	// would reset the count, so none is sent while waiting.
	waitFor(t, "eng-c ejected", func() bool { return engineReason(t, f, "eng-c") == "outlier" })
	st := f.open(t)
	mustSend(t, st, withSubset(chatHeaders(true, "x-conversation-id", "probe"), bad))
	checkImmediate(t, mustRecv(t, st), 503, "no_engine_available") // nothing left in the subset
}

// engineReason is why /v1/routing says engine is unavailable ("" when
// it is available).
func engineReason(t *testing.T, f *fixture, engine string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	f.d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/routing?cluster=fe-a", nil))
	var info struct {
		Engines []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		} `json:"engines"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	for _, e := range info.Engines {
		if e.Name == engine {
			return e.Reason
		}
	}
	return ""
}

func endRequestStatus(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient, code, served string) {
	t.Helper()
	mustSend(t, st, responseHeaders(code, served))
	mustRecv(t, st)
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			return
		}
	}
}

// TestResponseBodyStreamedBack: in FULL_DUPLEX_STREAMED the response body
// chunks come back unchanged, and trailers are answered.
func TestResponseBodyStreamedBack(t *testing.T) {
	f := newFixture(t, nil)
	st := f.open(t)
	mustSend(t, st, chatHeaders(true, "x-conversation-id", "r"))
	mustRecv(t, st)
	mustSend(t, st, responseHeaders("200", ""))
	mustRecv(t, st)
	for i, chunk := range []string{"data: {\"x\":1}\n\n", "data: [DONE]\n\n"} {
		mustSend(t, st, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: []byte(chunk), EndOfStream: i == 1}}})
		sr := mustRecv(t, st).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if string(sr.GetBody()) != chunk || sr.GetEndOfStream() != (i == 1) {
			t.Fatalf("response chunk %d came back as %q", i, sr.GetBody())
		}
	}
	mustSend(t, st, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: &extprocv3.HttpTrailers{}}})
	if mustRecv(t, st).GetResponseTrailers() == nil {
		t.Fatal("response trailers not answered")
	}
}

// TestHealth: liveness serves at once; readiness (and the ext_proc and
// inference-extension services) once every cluster has a snapshot.
func TestHealth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.HealthInterval = "127.0.0.1:0", 10*time.Millisecond
	d := newPlane(t)
	s, err := New(cfg, Deps{Plane: d})
	if err != nil {
		t.Fatal(err)
	}
	hc := healthpb.NewHealthClient(serve(t, s))
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health %q: %v", service, err)
		}
		return resp.GetStatus()
	}
	if check("liveness") != healthpb.HealthCheckResponse_SERVING || check("readiness") != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatal("before a snapshot: want live, not ready")
	}
	setSnapshot(t, d, 1, 0)
	deadline := time.Now().Add(5 * time.Second)
	for _, svc := range []string{"", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor", "inference-extension"} {
		for check(svc) != healthpb.HealthCheckResponse_SERVING {
			if time.Now().After(deadline) {
				t.Fatalf("%q not serving after the snapshot", svc)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// picked checks a request-headers answer carrying a pick and returns the
// endpoints.
func picked(t *testing.T, resp *extprocv3.ProcessingResponse) []string {
	t.Helper()
	return destination(t, resp.GetRequestHeaders().GetResponse(), resp.GetDynamicMetadata())
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
