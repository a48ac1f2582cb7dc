package extproc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/dataplane"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)

// engines are the fixture's engines and their endpoints. Nothing is
// sent to them: in picker mode the gateway forwards requests.
var engines = map[string]string{"eng-a": "10.0.0.1:8000", "eng-b": "10.0.0.2:8000", "eng-c": "10.0.0.3:8000"}

// fixture is a data plane for fe-a over three engines, an endpoint
// picker in front of it on a real gRPC port, and a client connected to
// it as Envoy would be.
type fixture struct {
	d    *dataplane.DataPlane
	s    *Server
	conn *grpc.ClientConn
}

func newFixture(t *testing.T, mut func(*Config)) *fixture {
	t.Helper()
	d := newPlane(t)
	setSnapshot(t, d, 1, 0)
	xc := DefaultConfig()
	xc.Addr = "127.0.0.1:0"
	if mut != nil {
		mut(&xc)
	}
	s, err := New(xc, Deps{Plane: d})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{d: d, s: s, conn: serve(t, s)}
}

// newPlane is a data plane for fe-a over the engines, with no snapshot.
func newPlane(t testing.TB) *dataplane.DataPlane {
	t.Helper()
	cfg := dataplane.DefaultConfig()
	cfg.Clusters = []string{"fe-a"}
	cfg.ConversationSlots = 1 << 12
	cfg.EngineURLs = map[string]string{}
	for name, ep := range engines {
		cfg.EngineURLs[name] = "http://" + ep
	}
	d, err := dataplane.New(cfg, dataplane.Deps{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// serve runs s until the test ends and returns a client connection.
func serve(t testing.TB, s *Server) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bound := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(a string) { bound <- a }) }()
	var addr string
	select {
	case addr = <-bound:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return conn
}

func setSnapshot(t testing.TB, d *dataplane.DataPlane, version uint64, shed float64) {
	t.Helper()
	w := map[string]float64{"eng-a": 0.4, "eng-b": 0.3, "eng-c": 0.3}
	if shed > 0 {
		w = map[string]float64{"eng-a": 0.4 * (1 - shed), "eng-b": 0.3 * (1 - shed), "eng-c": 0.3 * (1 - shed)}
	}
	if err := d.SetSnapshot(&schemas.Snapshot{Version: version, Cluster: "fe-a", CreatedAt: t0, Weights: w, ShedFraction: shed}); err != nil {
		t.Fatal(err)
	}
}

// open starts one ext_proc stream, as Envoy does per request.
func (f *fixture) open(t *testing.T) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := extprocv3.NewExternalProcessorClient(f.conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// headers is a RequestHeaders message; kv are name, value pairs.
func headers(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hm, EndOfStream: eos}}}
}

// chatHeaders are a chat request's headers as Envoy sends them.
func chatHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return headers(eos, append([]string{":method", "POST", ":path", "/v1/chat/completions", "content-type", "application/json"}, kv...)...)
}

func body(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

// responseHeaders is the response path's headers with the served
// endpoint in the envoy.lb metadata.
func responseHeaders(status, served string) *extprocv3.ProcessingRequest {
	req := headers(false, ":status", status)
	req.Request = &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: req.GetRequestHeaders()}
	if served != "" {
		req.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			MetadataNamespace: {Fields: map[string]*structpb.Value{ServedKey: structpb.NewStringValue(served)}}}}
	}
	return req
}

// withSubset adds the gateway's subset hint to req.
func withSubset(req *extprocv3.ProcessingRequest, endpoints ...string) *extprocv3.ProcessingRequest {
	vals := make([]*structpb.Value, len(endpoints))
	for i, e := range endpoints {
		vals[i] = structpb.NewStringValue(e)
	}
	req.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		SubsetNamespace: {Fields: map[string]*structpb.Value{SubsetKey: structpb.NewListValue(&structpb.ListValue{Values: vals})}}}}
	return req
}

// withMode adds a ProtocolConfiguration naming the request body mode.
func withMode(req *extprocv3.ProcessingRequest, mode filterv3.ProcessingMode_BodySendMode) *extprocv3.ProcessingRequest {
	req.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: mode, ResponseBodyMode: mode}
	return req
}

func mustSend(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient, reqs ...*extprocv3.ProcessingRequest) {
	t.Helper()
	for _, r := range reqs {
		if err := st.Send(r); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

func mustRecv(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient) *extprocv3.ProcessingResponse {
	t.Helper()
	resp, err := st.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return resp
}

// destination checks a request-headers answer (from the headers or the
// body response) and returns its endpoint list.
func destination(t *testing.T, common *extprocv3.CommonResponse, md *structpb.Struct) []string {
	t.Helper()
	if common == nil || !common.GetClearRouteCache() {
		t.Fatalf("answer %v does not clear the route cache", common)
	}
	var header string
	for _, h := range common.GetHeaderMutation().GetSetHeaders() {
		if h.GetHeader().GetKey() == HeaderDestination {
			header = string(h.GetHeader().GetRawValue())
			if h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
				t.Fatalf("destination header appended, not overwritten: a client could choose its engine")
			}
		}
	}
	meta := md.GetFields()[MetadataNamespace].GetStructValue().GetFields()[HeaderDestination].GetStringValue()
	if header == "" || header != meta {
		t.Fatalf("destination header %q and metadata %q must be equal and set", header, meta)
	}
	return strings.Split(header, ",")
}

// pickOf is the data plane's own pick for a conversation id, as an
// endpoint.
func pickOf(t *testing.T, d *dataplane.DataPlane, conv string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/pick", strings.NewReader(`{"conversation_id":"`+conv+`"}`)))
	for name, ep := range engines {
		if strings.Contains(rec.Body.String(), `"engine":"`+name+`"`) {
			return ep
		}
	}
	t.Fatalf("pick %s: %s", conv, rec.Body)
	return ""
}
