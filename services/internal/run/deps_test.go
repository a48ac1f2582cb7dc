package run

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Nil dependencies get working defaults that record nothing.
func TestDepsWithDefaultsFillsNil(t *testing.T) {
	d := Deps{}.WithDefaults()
	if d.Logger == nil || d.Meter == nil || d.Tracer == nil || d.Propagator == nil || d.Health == nil || d.Now == nil {
		t.Fatalf("a nil field is left: %+v", d)
	}
	if d.Logger.Enabled(context.Background(), slog.LevelError) {
		t.Error("the default logger is enabled; it must discard")
	}
	_, span := d.Tracer.Tracer("t").Start(context.Background(), "s")
	if span.IsRecording() {
		t.Error("the default tracer records spans")
	}
	span.End()
	if _, err := d.Meter.Meter("t").Int64Counter("c"); err != nil {
		t.Errorf("the default meter: %v", err)
	}
	if _, ok := d.Health.Status(); !ok {
		t.Error("the default health is not ready with no components")
	}
	if got := d.Now(); time.Since(got).Abs() > time.Minute {
		t.Errorf("the default clock says %v", got)
	}
}

// Given dependencies are kept as they are.
func TestDepsWithDefaultsKeepsGiven(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	mp, tp := sdkmetric.NewMeterProvider(), sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	in := Deps{
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Meter:      mp,
		Tracer:     tp,
		Propagator: propagation.Baggage{},
		Health:     NewHealth(),
		Now:        func() time.Time { return at },
	}
	d := in.WithDefaults()
	if d.Logger != in.Logger || d.Meter != in.Meter || d.Tracer != in.Tracer || d.Propagator != in.Propagator || d.Health != in.Health {
		t.Fatalf("a given dependency was replaced: %+v", d)
	}
	if !d.Now().Equal(at) {
		t.Errorf("clock replaced: %v", d.Now())
	}
}
