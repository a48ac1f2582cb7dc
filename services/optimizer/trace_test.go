package optimizer

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
)

// TestTraceFromFeaturesToSnapshot follows one solve across the loop: the
// trace context in a features record's Kafka headers becomes the parent of
// the solve span, the publish span is its child, and the snapshot's NATS
// message headers carry the publish span's context.
func TestTraceFromFeaturesToSnapshot(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	b := newBrokers(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	kc := kafka.DefaultClientConfig()
	kc.Brokers = b.kafka
	o, err := New(testConfig(f, "opt-t"), Deps{JetStream: b.js, Kafka: &kc, Tracer: tp, Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 10*time.Second, "the first version", func() bool { return b.version(t) >= 1 })
	v := b.version(t)

	// The aggregator's span that emitted the window.
	agg, span := tp.Tracer("test-aggregator").Start(context.Background(), "aggregator.emit")
	span.End()
	want := span.SpanContext().TraceID()
	rec := schemas.FeaturesToRecord(memory.DefaultAllocator, trafficRows(f, 1, exampleDemand, nil))
	value, err := arrowipc.EncodeStream(schemas.FeatureSchema, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: schemas.TopicFeatures, Key: []byte(strconv.Itoa(1)), Value: value}
	kafka.InjectTrace(agg, prop, r)
	if err := b.prod.ProduceSync(testCtx(t, 10*time.Second), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the version of the traced window", func() bool { return b.version(t) > v })

	// The spans end when the cycle does, a moment after the version is out.
	var solve, publish *tracetest.SpanStub
	waitFor(t, 10*time.Second, "the solve and publish spans in the aggregator's trace", func() bool {
		solve, publish = nil, nil
		spans := exp.GetSpans()
		for i := range spans {
			s := &spans[i]
			if s.SpanContext.TraceID() != want {
				continue
			}
			switch s.Name {
			case "optimizer.solve":
				solve = s
			case "optimizer.publish":
				publish = s
			}
		}
		return solve != nil && publish != nil
	})
	if solve.Parent.SpanID() != span.SpanContext().SpanID() || publish.Parent.SpanID() != solve.SpanContext.SpanID() {
		t.Errorf("span tree: solve's parent %s (want the record's %s), publish's parent %s (want solve %s)",
			solve.Parent.SpanID(), span.SpanContext().SpanID(), publish.Parent.SpanID(), solve.SpanContext.SpanID())
	}
	st, err := b.js.Stream(testCtx(t, 5*time.Second), "KV_"+schemas.BucketWeights)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(testCtx(t, 5*time.Second), "$KV."+schemas.BucketWeights+".fe-west")
	if err != nil {
		t.Fatal(err)
	}
	got := trace.SpanContextFromContext(prop.Extract(context.Background(), kv.HeaderCarrier(nats.Header(m.Header))))
	if got.TraceID() != want || got.SpanID() != publish.SpanContext.SpanID() {
		t.Errorf("snapshot headers carry %s/%s, want the publish span %s/%s", got.TraceID(), got.SpanID(), want, publish.SpanContext.SpanID())
	}
}
