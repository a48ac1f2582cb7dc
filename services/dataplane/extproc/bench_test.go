package extproc

import (
	"context"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
)

// captureStream is the server side of a stream without a network, for
// measuring the picker alone: it keeps the last response.
type captureStream struct {
	grpc.ServerStream
	ctx  context.Context
	last *extprocv3.ProcessingResponse
}

func (c *captureStream) Context() context.Context { return c.ctx }

func (c *captureStream) Send(r *extprocv3.ProcessingResponse) error { c.last = r; return nil }

func (c *captureStream) Recv() (*extprocv3.ProcessingRequest, error) { return nil, nil }

// BenchmarkHeaderOnlyPick is the endpoint picker's own time per request
// when the headers carry the key: read the headers, pick with the
// guardrails and two fallbacks, build the answer (header, metadata),
// and release the pick, without gRPC.
func BenchmarkHeaderOnlyPick(b *testing.B) {
	d := newPlane(b)
	setSnapshot(b, d, 1, 0)
	s, err := New(DefaultConfig(), Deps{Plane: d})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*extprocv3.ProcessingRequest, 1024)
	for i := range reqs {
		reqs[i] = chatHeaders(true, "x-conversation-id", "conversation-"+strconv.Itoa(i))
	}
	cs := &captureStream{ctx: context.Background()}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st := newStream(s, cs)
		if _, err := st.handle(reqs[i&1023]); err != nil || cs.last.GetRequestHeaders() == nil {
			b.Fatalf("%v %v", err, cs.last)
		}
		st.finish()
	}
}

// BenchmarkHeaderOnlyGRPC is one header-only request end to end over a
// loopback gRPC connection, as Envoy makes it: open a stream, send the
// headers, read the pick, close the stream.
func BenchmarkHeaderOnlyGRPC(b *testing.B) {
	d := newPlane(b)
	setSnapshot(b, d, 1, 0)
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	s, err := New(cfg, Deps{Plane: d})
	if err != nil {
		b.Fatal(err)
	}
	client := extprocv3.NewExternalProcessorClient(serve(b, s))
	reqs := make([]*extprocv3.ProcessingRequest, 1024)
	for i := range reqs {
		reqs[i] = chatHeaders(true, "x-conversation-id", "conversation-"+strconv.Itoa(i))
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st, err := client.Process(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Send(reqs[i&1023]); err != nil {
			b.Fatal(err)
		}
		if resp, err := st.Recv(); err != nil || resp.GetRequestHeaders() == nil {
			b.Fatalf("%v %v", resp, err)
		}
		_ = st.CloseSend()
		if _, err := st.Recv(); err == nil {
			b.Fatal("stream not closed")
		}
	}
}
