package enginesim

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names; the Prometheus exporter turns them into
// ilb_enginesim_requests_total, ilb_enginesim_running, and so on (see
// README.md, Metrics).
const (
	metricRequests = "ilb.enginesim.requests"
	metricSignals  = "ilb.enginesim.signals"
	metricRunning  = "ilb.enginesim.running"
	metricWaiting  = "ilb.enginesim.waiting"
	metricKV       = "ilb.enginesim.kv_cache_utilization"
	metricReady    = "ilb.enginesim.ready_replicas"
	metricHealthy  = "ilb.enginesim.healthy"
	scopeName      = "github.com/ilb-router/ilb/services/enginesim"
)

// metrics reports the engines' atomics from one callback at collection
// time, so the request path builds no attribute sets.
type metrics struct {
	reg metric.Registration
}

type instruments struct {
	requests, signals                  metric.Int64ObservableCounter
	running, waiting, ready, healthyOK metric.Int64ObservableGauge
	kv                                 metric.Float64ObservableGauge
}

func newMetrics(mp metric.MeterProvider, s *Sim) (*metrics, error) {
	m := mp.Meter(scopeName)
	var in instruments
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	in.requests, err = m.Int64ObservableCounter(metricRequests, metric.WithDescription("Chat completions answered, by engine and result (served, failed, shed)."))
	add(err)
	in.signals, err = m.Int64ObservableCounter(metricSignals, metric.WithDescription("Signal events, by result (published, acked, failed, dropped)."))
	add(err)
	in.running, err = m.Int64ObservableGauge(metricRunning, metric.WithDescription("Requests in the engine's running batch."))
	add(err)
	in.waiting, err = m.Int64ObservableGauge(metricWaiting, metric.WithDescription("Requests queued in the engine."))
	add(err)
	in.ready, err = m.Int64ObservableGauge(metricReady, metric.WithDescription("The engine's ready replicas."))
	add(err)
	in.healthyOK, err = m.Int64ObservableGauge(metricHealthy, metric.WithDescription("1 when the engine reports itself healthy, else 0."))
	add(err)
	in.kv, err = m.Float64ObservableGauge(metricKV, metric.WithDescription("Fraction of the engine's KV memory held by running requests (vLLM's kv_cache_usage_perc)."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		observeEngines(o, &in, s.set.Load().list)
		observeSignals(o, &in, s.signals.stats())
		return nil
	}, in.requests, in.signals, in.running, in.waiting, in.ready, in.healthyOK, in.kv)
	if err != nil {
		return nil, err
	}
	return &metrics{reg: reg}, nil
}

// engineSets are one engine's precomputed attribute sets.
type engineSets struct {
	engine, served, failed, shed metric.MeasurementOption
}

func newEngineSets(engine string) engineSets {
	name := attribute.String("engine", engine)
	return engineSets{
		engine: metric.WithAttributes(name),
		served: metric.WithAttributes(name, attribute.String("result", "served")),
		failed: metric.WithAttributes(name, attribute.String("result", "failed")),
		shed:   metric.WithAttributes(name, attribute.String("result", "shed")),
	}
}

func observeEngines(o metric.Observer, in *instruments, engines []*simEngine) {
	for _, e := range engines {
		a := e.attrs
		o.ObserveInt64(in.requests, int64(e.served.Load()), a.served)
		o.ObserveInt64(in.requests, int64(e.failed.Load()), a.failed)
		o.ObserveInt64(in.requests, int64(e.shed.Load()), a.shed)
		o.ObserveInt64(in.running, e.running.Load(), a.engine)
		o.ObserveInt64(in.waiting, e.waiting.Load(), a.engine)
		o.ObserveInt64(in.ready, e.ready.Load(), a.engine)
		ok := int64(0)
		if e.healthy.Load() && e.ready.Load() > 0 {
			ok = 1
		}
		o.ObserveInt64(in.healthyOK, ok, a.engine)
		o.ObserveFloat64(in.kv, e.kvUtil.Load(), a.engine)
	}
}

var signalResults = [...]metric.MeasurementOption{
	metric.WithAttributes(attribute.String("result", "published")),
	metric.WithAttributes(attribute.String("result", "acked")),
	metric.WithAttributes(attribute.String("result", "failed")),
	metric.WithAttributes(attribute.String("result", "dropped")),
}

func observeSignals(o metric.Observer, in *instruments, st SignalStats) {
	for i, v := range [...]uint64{st.Published, st.Acked, st.Failed, st.Dropped} {
		o.ObserveInt64(in.signals, int64(v), signalResults[i])
	}
}

func (m *metrics) close() { _ = m.reg.Unregister() }
