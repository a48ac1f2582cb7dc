package main

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestDataplaneExtProc runs `ilb dataplane --snapshot FILE --engine ...
// --ext-proc ADDR` as an operator would, checks the picker's gRPC health
// and asks it for a pick as Envoy does.
func TestDataplaneExtProc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap.json")
	writeSnapshot(t, path, 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5})
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb streamstest.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"dataplane", "--http", "127.0.0.1:0", "--cluster", "fe-a", "--snapshot", path,
			"--engine", "eng-a=http://10.0.0.1:8000", "--engine", "eng-b=http://10.0.0.2:8000", "--ext-proc", "127.0.0.1:0"}, &out, &errb)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("ilb dataplane exited %d: %s", code, errb.String())
		}
	}()
	re := regexp.MustCompile(`endpoint picker \(ext_proc\) on grpc://([0-9.:]+)`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no ext_proc address printed: %q %q", out.String(), errb.String())
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "readiness"})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("readiness: %v %v", h, err)
	}
	st, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hdrs := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/v1/chat/completions")},
		{Key: "x-conversation-id", RawValue: []byte("c-1")}}}
	if err := st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs, EndOfStream: true}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	dest := resp.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
	if want := map[string]string{"eng-a": "10.0.0.1:8000", "eng-b": "10.0.0.2:8000"}[pickAll(t, extractHTTP(t, out.String()), 2)[1]]; !strings.HasPrefix(dest, want+",") {
		t.Fatalf("destination %q, want %s first and the other engine as fallback", dest, want)
	}
	_ = st.CloseSend()
}

// extractHTTP finds the data plane's HTTP base URL in its output.
func extractHTTP(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`on (http://[0-9.:]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no HTTP address in %q", out)
	}
	return m[1]
}

// TestFleetModels: the fleet file's model lists (an engine listing none
// serves default_model) and default_model reach the data plane's routing
// and GET /v1/models; --default-model wins over the file.
func TestFleetModels(t *testing.T) {
	fl := &schemas.Fleet{DefaultModel: "llama-3-8b", Engines: []schemas.FleetEngine{
		{Name: "a", Models: []string{"llama-3-70b"}}, {Name: "b"}}}
	cfg := dataplane.DefaultConfig()
	fleetModels(&cfg, fl, false)
	if cfg.DefaultModel != "llama-3-8b" || len(cfg.EngineModels) != 2 || cfg.EngineModels["a"][0] != "llama-3-70b" ||
		!slices.Equal(cfg.EngineModels["b"], []string{"llama-3-8b"}) {
		t.Fatalf("from the fleet: default %q, models %v", cfg.DefaultModel, cfg.EngineModels)
	}
	cfg.DefaultModel = "given"
	fleetModels(&cfg, fl, true)
	if cfg.DefaultModel != "given" {
		t.Fatalf("--default-model replaced by the fleet's: %q", cfg.DefaultModel)
	}
}
