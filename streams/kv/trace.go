package kv

import (
	"context"
	"slices"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier lets an OpenTelemetry propagator read and write NATS
// message headers. NATS header keys are case-sensitive and kept as
// written; the W3C propagator writes lower-case keys.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the first value of key, or "".
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

// Set replaces the values of key with value.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys returns the header keys, sorted.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// InjectTrace writes the trace context of ctx into msg's headers using p
// (the global propagator when p is nil).
func InjectTrace(ctx context.Context, p propagation.TextMapPropagator, msg *nats.Msg) {
	if p == nil {
		p = otel.GetTextMapPropagator()
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	p.Inject(ctx, HeaderCarrier(msg.Header))
}

// ExtractTrace returns ctx carrying the trace context in msg's headers
// using p (the global propagator when p is nil).
func ExtractTrace(ctx context.Context, p propagation.TextMapPropagator, msg *nats.Msg) context.Context {
	if p == nil {
		p = otel.GetTextMapPropagator()
	}
	return p.Extract(ctx, HeaderCarrier(msg.Header))
}
