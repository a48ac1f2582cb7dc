package run

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Deps is the part of a service's Deps that every ilb service has: how it
// logs, measures, traces and reports readiness, and its wall clock. A
// service copies its own fields in and calls WithDefaults, so that a nil
// dependency means the same in every service.
type Deps struct {
	Logger     *slog.Logger                  // nil discards logs
	Meter      metric.MeterProvider          // nil: no metrics
	Tracer     trace.TracerProvider          // nil: no spans
	Propagator propagation.TextMapPropagator // nil: otel's global propagator
	Health     *Health                       // nil: a private one
	Now        func() time.Time              // nil: time.Now
}

// WithDefaults returns d with every nil field replaced by the default
// its comment names.
func (d Deps) WithDefaults() Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Meter == nil {
		d.Meter = metricnoop.NewMeterProvider()
	}
	if d.Tracer == nil {
		d.Tracer = tracenoop.NewTracerProvider()
	}
	if d.Propagator == nil {
		d.Propagator = otel.GetTextMapPropagator()
	}
	if d.Health == nil {
		d.Health = NewHealth()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return d
}
