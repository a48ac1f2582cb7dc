package kafka_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func spanCtx(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

func TestRecordCarrier(t *testing.T) {
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("3")}}}
	shared := r.Headers
	c := kafka.RecordCarrier{R: r}
	if got := c.Get("a"); got != "3" {
		t.Fatalf("Get(a) = %q, want the last one", got)
	}
	if got := c.Get("A"); got != "" {
		t.Fatalf("Get is case-insensitive: %q", got)
	}
	c.Set("a", "9")
	if got := c.Keys(); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("Keys after Set = %v", got)
	}
	if c.Get("a") != "9" {
		t.Fatal("Set did not replace")
	}
	if string(shared[0].Value) != "1" || shared[0].Key != "a" {
		t.Fatal("Set modified the caller's header slice")
	}
}

func TestInjectExtractKnownAnswer(t *testing.T) {
	ctx, sc := spanCtx(t)
	p := propagation.TraceContext{}
	r := new(kgo.Record)
	kafka.InjectTrace(ctx, p, r)
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if got := (kafka.RecordCarrier{R: r}).Get("traceparent"); got != want {
		t.Fatalf("traceparent = %q, want %q", got, want)
	}
	got := trace.SpanContextFromContext(kafka.ExtractTrace(context.Background(), p, r))
	if !got.Equal(sc.WithRemote(true)) {
		t.Fatalf("extracted %v, want %v", got, sc)
	}
	empty := new(kgo.Record)
	if trace.SpanContextFromContext(kafka.ExtractTrace(context.Background(), p, empty)).IsValid() {
		t.Fatal("extracted a span context from a record without one")
	}
}

// TestTraceSurvivesBroker sends the trace context through a real broker.
func TestTraceSurvivesBroker(t *testing.T) {
	addrs := streamstest.Kafka(t, "tr")
	p := newProducer(t, addrs, func(pc *kafka.ProducerConfig) { pc.Propagator = propagation.TraceContext{} })
	ctx, sc := spanCtx(t)
	if err := p.ProduceSync(ctx, "tr", []byte("k"), []byte("v"), kgo.RecordHeader{Key: "x", Value: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	r := runGroup(t, fastGroup(addrs, "trg", "tr"), c.handle)
	waitFor(t, 15*time.Second, "record consumed", func() bool { return c.count() == 1 })
	r.stop(t)
	rec := c.recs[0]
	if (kafka.RecordCarrier{R: rec}).Get("x") != "y" {
		t.Fatal("caller's header lost")
	}
	got := trace.SpanContextFromContext(kafka.ExtractTrace(context.Background(), propagation.TraceContext{}, rec))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() {
		t.Fatalf("trace through broker: got %v, want %v", got, sc)
	}
}
