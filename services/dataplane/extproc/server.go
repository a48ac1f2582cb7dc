package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ilb-router/ilb/services/dataplane"
)

// Health service names the server reports: gRPC's overall status (""),
// the names GIE's protocol document gives, and the one its reference
// picker (lwepp) uses.
var (
	livenessServices  = []string{"liveness"}
	readinessServices = []string{"", "readiness", extprocv3.ExternalProcessor_ServiceDesc.ServiceName, "inference-extension"}
)

// Server is the endpoint picker: an ext_proc gRPC service in front of a
// data plane.
type Server struct {
	cfg    Config
	plane  *dataplane.DataPlane
	log    *slog.Logger
	now    func() time.Time
	health *health.Server
	reg    metric.Registration
	counts counters
}

// New validates cfg and returns a Server for deps.Plane.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Plane == nil {
		return nil, errors.New("extproc: no data plane")
	}
	s := &Server{cfg: cfg, plane: deps.Plane, log: deps.Logger, now: deps.Now, health: health.NewServer()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	mp := deps.Meter
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	reg, err := s.counts.register(mp)
	if err != nil {
		return nil, err
	}
	s.reg = reg
	for _, name := range livenessServices {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	s.updateHealth()
	return s, nil
}

// Register adds the ext_proc and health services to g (for callers that
// run their own gRPC server, such as tests).
func (s *Server) Register(g *grpc.Server) {
	extprocv3.RegisterExternalProcessorServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// Run serves on Config.Addr until ctx ends. ready, when not nil, receives
// the bound address once the server listens.
func (s *Server) Run(ctx context.Context, ready func(addr string)) error {
	defer s.reg.Unregister()
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("extproc: listen on %s: %w", s.cfg.Addr, err)
	}
	g := grpc.NewServer()
	s.Register(g)
	if ready != nil {
		ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ln) }()
	t := time.NewTicker(s.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.health.Shutdown()
			stopped := make(chan struct{})
			go func() { g.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second): // streams of long generations: cut them
				g.Stop()
				<-stopped
			}
			<-done
			return nil
		case err := <-done:
			return fmt.Errorf("extproc: serve: %w", err)
		case <-t.C:
			s.updateHealth()
		}
	}
}

// updateHealth reports the data plane's readiness (a snapshot for every
// cluster) on the readiness services.
func (s *Server) updateHealth() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if _, ok := s.plane.Health().Status(); ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range readinessServices {
		s.health.SetServingStatus(name, st)
	}
}

// Process serves one ext_proc stream: one HTTP request through the
// gateway. Bad input ends the stream with a status and a counter; the
// request's pick is released however the stream ends.
func (s *Server) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	st := newStream(s, srv)
	defer st.finish()
	for {
		req, err := srv.Recv()
		switch {
		case err == io.EOF:
			return nil
		case status.Code(err) == codes.Canceled || status.Code(err) == codes.DeadlineExceeded:
			if st.midRequest() {
				s.counts.errors[reasonClientGone].Add(1)
			}
			return nil
		case err != nil:
			s.counts.errors[reasonBadFrame].Add(1)
			s.log.Debug("ext_proc: bad frame", "err", err)
			return status.Errorf(codes.InvalidArgument, "ext_proc: reading a ProcessingRequest: %v", err)
		}
		if done, err := st.handle(req); err != nil || done {
			return err
		}
	}
}
