package extproc

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names are a contract (README.md).
const (
	metricDecisions = "ilb_extproc_decisions_total"
	metricImmediate = "ilb_extproc_immediate_responses_total"
	metricErrors    = "ilb_extproc_errors_total"
	instrumentation = "github.com/ilb-router/ilb/services/dataplane/extproc"
)

// decision says what a pick was made on: the headers alone, or the
// buffered body.
type decision uint8

const (
	onHeaders decision = iota
	onBody
	numDecisions
)

var decisionNames = [numDecisions]string{"headers", "body"}

// reason says why a stream failed or was cut short.
type reason uint8

const (
	reasonBadFrame      reason = iota // a message gRPC could not decode
	reasonProtocol                    // messages out of order, or none set
	reasonBodyTooLarge                // body over MaxBodyBytes (answered 413)
	reasonClientGone                  // the gateway ended the stream mid-request
	reasonUnknownSubset               // a subset hint naming no known engine
	numReasons
)

var reasonNames = [numReasons]string{"bad_frame", "protocol", "body_too_large", "client_gone", "unknown_subset"}

// immediateStatuses are the statuses the server answers itself.
var immediateStatuses = [...]int{400, 404, 413, 429, 503}

// counters are the hot-path counts, atomics read at collection time.
type counters struct {
	decisions [numDecisions]atomic.Int64
	errors    [numReasons]atomic.Int64
	immediate [len(immediateStatuses)]atomic.Int64
	other     atomic.Int64 // immediate answers with another status
}

func (c *counters) immediateAt(status int) *atomic.Int64 {
	for i, s := range immediateStatuses {
		if s == status {
			return &c.immediate[i]
		}
	}
	return &c.other
}

// register reports the counters through mp.
func (c *counters) register(mp metric.MeterProvider) (metric.Registration, error) {
	m := mp.Meter(instrumentation)
	dec, err1 := m.Int64ObservableCounter(metricDecisions,
		metric.WithDescription("Endpoint picks over ext_proc, by what they were decided on: headers or body."))
	imm, err2 := m.Int64ObservableCounter(metricImmediate,
		metric.WithDescription("ImmediateResponses sent instead of a pick, by HTTP status."))
	bad, err3 := m.Int64ObservableCounter(metricErrors,
		metric.WithDescription("ext_proc streams ended or answered because of bad input, by reason."))
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return nil, fmt.Errorf("extproc: metrics: %w", err)
		}
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i := range c.decisions {
			o.ObserveInt64(dec, c.decisions[i].Load(), metric.WithAttributes(attribute.String("decision", decisionNames[i])))
		}
		for i, s := range immediateStatuses {
			o.ObserveInt64(imm, c.immediate[i].Load(), metric.WithAttributes(attribute.String("status", strconv.Itoa(s))))
		}
		o.ObserveInt64(imm, c.other.Load(), metric.WithAttributes(attribute.String("status", "other")))
		for i := range c.errors {
			o.ObserveInt64(bad, c.errors[i].Load(), metric.WithAttributes(attribute.String("reason", reasonNames[i])))
		}
		return nil
	}, dec, imm, bad)
}
