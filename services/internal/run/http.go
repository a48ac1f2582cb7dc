package run

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// HTTPConfig holds the limits every ilb HTTP server applies.
type HTTPConfig struct {
	Addr              string
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration // whole request, body included
	WriteTimeout      time.Duration // 0 for servers that stream responses
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	ShutdownTimeout   time.Duration
}

// DefaultHTTPConfig returns limits suited to an API server on addr.
func DefaultHTTPConfig(addr string) HTTPConfig {
	return HTTPConfig{
		Addr:              addr,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      0, // streaming chat completions may run for minutes
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ShutdownTimeout:   5 * time.Second,
	}
}

// Validate checks the config.
func (c HTTPConfig) Validate() error {
	if c.Addr == "" {
		return errors.New("http: empty listen address")
	}
	if c.ReadHeaderTimeout <= 0 || c.MaxHeaderBytes <= 0 {
		return errors.New("http: ReadHeaderTimeout and MaxHeaderBytes must be positive")
	}
	return nil
}

// Server is an HTTP server bound to its address before Run, so callers
// learn the real port when Addr ends in ":0".
type Server struct {
	cfg HTTPConfig
	srv *http.Server
	ln  net.Listener
}

// Listen binds cfg.Addr and returns a Server ready to Run.
func Listen(cfg HTTPConfig, h http.Handler) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("http: listen %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
	}
	return &Server{cfg: cfg, srv: srv, ln: ln}, nil
}

// Addr is the bound address, e.g. "127.0.0.1:8080".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx is cancelled, then shuts down gracefully within the
// configured timeout.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	timeout := s.cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-errc
	return err
}
