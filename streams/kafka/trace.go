package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// RecordCarrier lets an OpenTelemetry propagator read and write a
// record's headers. Header keys are case-sensitive, as Kafka's are; Set
// replaces every header with that key, Get returns the last one.
type RecordCarrier struct{ R *kgo.Record }

var _ propagation.TextMapCarrier = RecordCarrier{}

// Get returns the value of the last header named key, or "".
func (c RecordCarrier) Get(key string) string {
	for i := len(c.R.Headers) - 1; i >= 0; i-- {
		if c.R.Headers[i].Key == key {
			return string(c.R.Headers[i].Value)
		}
	}
	return ""
}

// Set replaces the headers named key with one holding value.
func (c RecordCarrier) Set(key, value string) {
	hs := c.R.Headers[:0:0] // fresh backing array: the caller may share the old one
	for _, h := range c.R.Headers {
		if h.Key != key {
			hs = append(hs, h)
		}
	}
	c.R.Headers = append(hs, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys returns the header keys in record order, duplicates included.
func (c RecordCarrier) Keys() []string {
	keys := make([]string, len(c.R.Headers))
	for i, h := range c.R.Headers {
		keys[i] = h.Key
	}
	return keys
}

// InjectTrace writes the trace context of ctx into r's headers using p
// (the global propagator when p is nil).
func InjectTrace(ctx context.Context, p propagation.TextMapPropagator, r *kgo.Record) {
	if p == nil {
		p = otel.GetTextMapPropagator()
	}
	p.Inject(ctx, RecordCarrier{r})
}

// ExtractTrace returns ctx carrying the trace context found in r's headers
// using p (the global propagator when p is nil); use it as the parent of
// the span that processes r.
func ExtractTrace(ctx context.Context, p propagation.TextMapPropagator, r *kgo.Record) context.Context {
	if p == nil {
		p = otel.GetTextMapPropagator()
	}
	return p.Extract(ctx, RecordCarrier{r})
}
