package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"time"

	"github.com/ilb-router/ilb/services/internal/telemetry"
)

// serviceFlags are the flags every long-running service shares: how much
// it logs, and where its traces go.
type serviceFlags struct {
	name  string // telemetry service name, e.g. ilb-optimizer
	level string
	otlp  string
}

func addServiceFlags(fs *flag.FlagSet, name string) *serviceFlags {
	s := &serviceFlags{name: name}
	fs.StringVar(&s.level, "log-level", "info", "log level: debug, info, warn or error (to stderr)")
	fs.StringVar(&s.otlp, "otlp", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "OTLP/HTTP endpoint for traces (default $OTEL_EXPORTER_OTLP_ENDPOINT)")
	return s
}

// logger returns the stderr logger at --log-level; a bad level is a
// usage error. Call it before starting anything.
func (s *serviceFlags) logger(e *env) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(s.level)); err != nil {
		return nil, badInput("--log-level %q: want debug, info, warn or error", s.level)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv})), nil
}

// service is what a started service shares: its logger and telemetry.
type service struct {
	log *slog.Logger
	tel *telemetry.Telemetry
}

// start checks --log-level and sets up telemetry; close flushes it.
func (s *serviceFlags) start(ctx context.Context, e *env) (*service, error) {
	log, err := s.logger(e)
	if err != nil {
		return nil, err
	}
	tcfg := telemetry.DefaultConfig(s.name)
	tcfg.OTLPEndpoint = s.otlp
	tel, err := telemetry.Setup(ctx, tcfg)
	if err != nil {
		return nil, err
	}
	return &service{log: log, tel: tel}, nil
}

// close flushes the telemetry, waiting at most 5 s.
func (sv *service) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = sv.tel.Shutdown(ctx)
}
