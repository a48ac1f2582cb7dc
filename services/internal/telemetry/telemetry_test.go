package telemetry

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

func TestMetricsExposedInPrometheusText(t *testing.T) {
	ctx := context.Background()
	tel, err := Setup(ctx, DefaultConfig("ilb-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	c, err := tel.Meter.Meter("test").Int64Counter("ilb_test_picks_total")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(ctx, 3)
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "ilb_test_picks_total") || !strings.Contains(string(body), " 3") {
		t.Fatalf("counter missing from /metrics:\n%s", body)
	}
}

func TestTraceContextPropagates(t *testing.T) {
	ctx := context.Background()
	tel, err := Setup(ctx, DefaultConfig("ilb-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	sctx, span := tel.Tracer.Tracer("test").Start(ctx, "solve")
	defer span.End()
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(sctx, carrier)
	tp := carrier.Get("traceparent")
	if !strings.Contains(tp, span.SpanContext().TraceID().String()) {
		t.Fatalf("traceparent %q does not carry trace %s", tp, span.SpanContext().TraceID())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {ServiceName: "x", SampleRatio: 2}} {
		if c.Validate() == nil {
			t.Errorf("%+v validated", c)
		}
	}
}
