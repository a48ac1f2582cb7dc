// Package telemetry is the only place ilb imports the OpenTelemetry SDK and
// its exporters. Setup builds a tracer provider (OTLP over HTTP when an
// endpoint is configured) and a meter provider whose metrics are exposed in
// Prometheus text format on /metrics, and installs the W3C trace-context
// propagator that carries traces through Kafka and NATS headers. Services
// receive the providers through their Config; nothing here is global except
// the propagator, which OpenTelemetry's propagation API requires.
//
// # Concurrency
//
// Providers and the metrics handler are safe for concurrent use. Shutdown
// is called once, by the owner, after the services have stopped.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Config selects exporters. Only main fills it (from flags and the
// standard OTEL_* environment variables).
type Config struct {
	ServiceName string
	// OTLPEndpoint is an OTLP/HTTP base URL such as http://collector:4318;
	// empty means spans are created (so trace context propagates) but not
	// exported.
	OTLPEndpoint string
	// SampleRatio is the fraction of root spans sampled, in [0,1].
	SampleRatio float64
}

// DefaultConfig samples every trace and exports nothing.
func DefaultConfig(service string) Config {
	return Config{ServiceName: service, SampleRatio: 1}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.ServiceName == "" {
		return errors.New("telemetry: empty service name")
	}
	if !(c.SampleRatio >= 0 && c.SampleRatio <= 1) {
		return fmt.Errorf("telemetry: sample ratio %v outside [0,1]", c.SampleRatio)
	}
	return nil
}

// Telemetry holds the providers a process passes to its services.
type Telemetry struct {
	Tracer   trace.TracerProvider
	Meter    metric.MeterProvider
	Registry *prometheus.Registry

	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

// Setup builds the providers.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(),
		// Explicit, so names follow deploy/METRICS.md whatever the global default.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	topts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	}
	if cfg.OTLPEndpoint != "" {
		te, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.OTLPEndpoint+"/v1/traces"))
		if err != nil {
			_ = mp.Shutdown(ctx)
			return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
		}
		topts = append(topts, sdktrace.WithBatcher(te))
	}
	tp := sdktrace.NewTracerProvider(topts...)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Telemetry{Tracer: tp, Meter: mp, Registry: reg, tp: tp, mp: mp}, nil
}

// MetricsHandler serves the registry in Prometheus text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{})
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}
