package aggregator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names. deploy/METRICS.md is the contract: the Prometheus
// exporter turns dots into underscores and adds _total to counters, so
// ilb.aggregator.events is served as ilb_aggregator_events_total.
const (
	instrumentationLib      = "github.com/ilb-router/ilb/services/aggregator"
	metricEvents            = "ilb.aggregator.events"
	metricDLQ               = "ilb.aggregator.dlq"
	metricTTFTP99           = "ilb.aggregator.ttft_p99_ms"
	metricLate              = "ilb.aggregator.late_events"
	metricSkipped           = "ilb.aggregator.skipped_events"
	metricWindows           = "ilb.aggregator.windows"
	metricPublishFailures   = "ilb.aggregator.publish_failures"
	metricCheckpointErrors  = "ilb.aggregator.checkpoint_errors"
	metricProfilesPublished = "ilb.aggregator.profiles_published"
	metricProfilesRefused   = "ilb.aggregator.profiles_refused"
)

// reason is a DLQ reason.
type reason uint8

const (
	reasonDecode reason = iota
	reasonValidate
	reasonUnknownSchema
	numReasons
)

var reasonNames = [numReasons]string{ReasonDecode, ReasonValidate, ReasonUnknownSchema}

func (r reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// counters are the hot-path counters: atomics, added once per batch and
// read by the metrics callback.
type counters struct {
	status, completion           atomic.Uint64
	dlq                          [numReasons]atomic.Uint64
	lateAny                      atomic.Uint64 // events late for at least one window
	dup, replayed, overflow      atomic.Uint64
	windows                      atomic.Uint64
	publishFailed, checkpointBad atomic.Uint64
	profilesPublished            atomic.Uint64
	// republished counts windows a restored partition emitted again and
	// did not publish, the group having them already (logged, not
	// exported).
	republished atomic.Uint64

	mu      sync.Mutex
	refused map[string]uint64  // profile refusals by reason
	p99     map[string]float64 // latest window's TTFT p99 by engine
}

func newCounters() *counters {
	return &counters{refused: map[string]uint64{}, p99: map[string]float64{}}
}

func (c *counters) addBatch(bc *batchCounts) {
	c.status.Add(bc.status)
	c.completion.Add(bc.completion)
	for i := range bc.dlq {
		c.dlq[i].Add(bc.dlq[i])
	}
	c.dup.Add(bc.dup)
	c.replayed.Add(bc.replayed)
	c.overflow.Add(bc.overflow)
}

func (c *counters) refuse(why string) {
	c.mu.Lock()
	c.refused[why]++
	c.mu.Unlock()
}

func (c *counters) setP99(engine string, ms float64) {
	c.mu.Lock()
	c.p99[engine] = ms
	c.mu.Unlock()
}

// registerMetrics creates the observable instruments and the callback
// that reads the counters.
func registerMetrics(mp metric.MeterProvider, c *counters) (metric.Registration, error) {
	m := mp.Meter(instrumentationLib)
	var errs []error
	counter := func(name, desc string) metric.Int64ObservableCounter {
		in, err := m.Int64ObservableCounter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return in
	}
	events := counter(metricEvents, "Signal events consumed and accepted, by type (status, completion).")
	dlq := counter(metricDLQ, "Signal records sent to the DLQ, by reason (decode, validate, unknown_schema).")
	late := counter(metricLate, "Events that arrived after one of their windows had closed: counted in LateEvents, not applied to it.")
	skipped := counter(metricSkipped, "Events not applied, by reason: duplicate (offset seen), replayed (already emitted before a restart), overflow (too many engines in a window).")
	windows := counter(metricWindows, "Windows emitted (one per signals partition and window).")
	pubFail := counter(metricPublishFailures, "Failed attempts to publish pending records (retried; offsets wait).")
	cpBad := counter(metricCheckpointErrors, "Window checkpoints that could not be restored or stored.")
	profPub := counter(metricProfilesPublished, "Profile tables published.")
	refused := counter(metricProfilesRefused, "Profile fits refused, by reason.")
	p99, err := m.Float64ObservableGauge(metricTTFTP99, metric.WithDescription("p99 time to first token of an engine over its latest emitted window, in milliseconds."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("aggregator: metrics: %w", err)
	}
	kv := func(k, v string) metric.ObserveOption { return metric.WithAttributes(attribute.String(k, v)) }
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(events, int64(c.status.Load()), kv("type", "status"))
		o.ObserveInt64(events, int64(c.completion.Load()), kv("type", "completion"))
		for i := range c.dlq {
			o.ObserveInt64(dlq, int64(c.dlq[i].Load()), kv("reason", reason(i).String()))
		}
		o.ObserveInt64(late, int64(c.lateAny.Load()))
		o.ObserveInt64(skipped, int64(c.dup.Load()), kv("reason", "duplicate"))
		o.ObserveInt64(skipped, int64(c.replayed.Load()), kv("reason", "replayed"))
		o.ObserveInt64(skipped, int64(c.overflow.Load()), kv("reason", "overflow"))
		o.ObserveInt64(windows, int64(c.windows.Load()))
		o.ObserveInt64(pubFail, int64(c.publishFailed.Load()))
		o.ObserveInt64(cpBad, int64(c.checkpointBad.Load()))
		o.ObserveInt64(profPub, int64(c.profilesPublished.Load()))
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range slices.Sorted(maps.Keys(c.refused)) {
			o.ObserveInt64(refused, int64(c.refused[r]), kv("reason", r))
		}
		for _, e := range slices.Sorted(maps.Keys(c.p99)) {
			o.ObserveFloat64(p99, c.p99[e], kv("engine", e))
		}
		return nil
	}, events, dlq, late, skipped, windows, pubFail, cpBad, profPub, refused, p99)
}
