package dataplane

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ilb-router/ilb/services/internal/affinity"
)

// Metric names are a contract: the Grafana dashboard and README.md use
// them. Counters on the request path are atomics read by one callback at
// collection time (no attribute sets are built per request); the rare
// events (rejected snapshots, swaps) use synchronous instruments.
const (
	metricPicks        = "ilb_dataplane_picks_total"
	metricFallbacks    = "ilb_dataplane_fallbacks_total"
	metricRejected     = "ilb_dataplane_snapshots_rejected_total"
	metricVersion      = "ilb_dataplane_snapshot_version"
	metricAge          = "ilb_dataplane_snapshot_age_seconds"
	metricRetries      = "ilb_dataplane_retries_total"
	metricRetryDenied  = "ilb_dataplane_retries_denied_total"
	metricUnreplayable = "ilb_dataplane_retries_unreplayable_total"
	metricShed         = "ilb_dataplane_shed_total"
	metricRefused      = "ilb_dataplane_admission_refused_total"
	metricPublishSwap  = "ilb_dataplane_publish_to_swap_seconds"
	metricRequests     = "ilb_dataplane_requests_total"
	metricThrottled    = "ilb_dataplane_throttled_total"
	metricInflight     = "ilb_dataplane_inflight"
	metricAvailable    = "ilb_dataplane_engine_available"
	metricEjections    = "ilb_dataplane_ejections_total"
	metricSignalsBad   = "ilb_dataplane_signals_rejected_total"
	metricStale        = "ilb_dataplane_snapshot_stale"
	metricKeySource    = "ilb_dataplane_picks_by_key_source_total"
	metricIneligible   = "ilb_dataplane_snapshot_ineligible_entries_total"
	metricPendingSync  = "ilb_dataplane_pending_sync_messages_total"
	metricPendingPeers = "ilb_dataplane_pending_sync_peers"
	instrumentationLib = "github.com/ilb-router/ilb/services/dataplane"
)

type metrics struct {
	rejected    metric.Int64Counter
	publishSwap metric.Float64Histogram
	ejections   metric.Int64Counter
	signalsBad  metric.Int64Counter
	pendingSync metric.Int64Counter
	reg         metric.Registration
	weights     metric.Registration
}

// observables are the asynchronous instruments the callback reports.
type observables struct {
	picks, fallbacks, retries, denied, unreplayable, shed, refused, requests, throttled, keySource, ineligible metric.Int64ObservableCounter
	version, inflight, available, stale, peers                                                                 metric.Int64ObservableGauge
	age                                                                                                        metric.Float64ObservableGauge
}

func newMetrics(mp metric.MeterProvider, d *DataPlane) (*metrics, error) {
	m := mp.Meter(instrumentationLib)
	var (
		out  metrics
		obs  observables
		errs []error
	)
	add := func(err error) { errs = append(errs, err) }
	var err error
	out.rejected, err = m.Int64Counter(metricRejected, metric.WithDescription("Snapshots rejected (bad, older, wrong cluster), by reason."))
	add(err)
	out.publishSwap, err = m.Float64Histogram(metricPublishSwap, metric.WithUnit("s"),
		metric.WithDescription("Time from a snapshot's created_at to its swap into the picker."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	add(err)
	out.ejections, err = m.Int64Counter(metricEjections, metric.WithDescription("Outlier ejections, by engine and reason."))
	add(err)
	out.signalsBad, err = m.Int64Counter(metricSignalsBad, metric.WithDescription("Signal records that failed decoding."))
	add(err)
	out.pendingSync, err = m.Int64Counter(metricPendingSync,
		metric.WithDescription("Pending-prefill messages between data planes, by result: published, taken, stale, bad."))
	add(err)
	obs.picks, err = m.Int64ObservableCounter(metricPicks, metric.WithDescription("Picks, by cluster and engine."))
	add(err)
	obs.fallbacks, err = m.Int64ObservableCounter(metricFallbacks, metric.WithDescription("Picks sent elsewhere than the table choice, by reason."))
	add(err)
	obs.retries, err = m.Int64ObservableCounter(metricRetries, metric.WithDescription("Retries granted by the retry budget."))
	add(err)
	obs.denied, err = m.Int64ObservableCounter(metricRetryDenied, metric.WithDescription("Retries the retry budget denied."))
	add(err)
	obs.unreplayable, err = m.Int64ObservableCounter(metricUnreplayable,
		metric.WithDescription("Failed attempts not retried because their streamed request body (over RetryBodyBytes) was already sent."))
	add(err)
	obs.shed, err = m.Int64ObservableCounter(metricShed, metric.WithDescription("Requests shed by the snapshot's shed fraction (429)."))
	add(err)
	obs.refused, err = m.Int64ObservableCounter(metricRefused,
		metric.WithDescription("Requests refused by local admission (429): no engine could start them within the TTFT SLO (queue or pending prefill over its limit)."))
	add(err)
	obs.requests, err = m.Int64ObservableCounter(metricRequests, metric.WithDescription("Requests answered, by status code."))
	add(err)
	obs.throttled, err = m.Int64ObservableCounter(metricThrottled, metric.WithDescription("Requests rejected by client-side throttling (503)."))
	add(err)
	obs.keySource, err = m.Int64ObservableCounter(metricKeySource,
		metric.WithDescription("Proxied requests picked, by where their affinity key came from: header, user, prompt or none."))
	add(err)
	obs.ineligible, err = m.Int64ObservableCounter(metricIneligible,
		metric.WithDescription("Weight entries of applied snapshots that give a request class an engine the fleet says does not serve it (skipped)."))
	add(err)
	obs.version, err = m.Int64ObservableGauge(metricVersion, metric.WithDescription("Version of the snapshot in use; 0 before the first."))
	add(err)
	obs.age, err = m.Float64ObservableGauge(metricAge, metric.WithUnit("s"), metric.WithDescription("now − created_at of the snapshot in use."))
	add(err)
	obs.stale, err = m.Int64ObservableGauge(metricStale, metric.WithDescription("1 while the stale policy applies."))
	add(err)
	obs.inflight, err = m.Int64ObservableGauge(metricInflight, metric.WithDescription("Proxied requests in flight, by cluster and engine."))
	add(err)
	obs.available, err = m.Int64ObservableGauge(metricAvailable, metric.WithDescription("1 when the engine takes requests, by cluster and engine."))
	add(err)
	obs.peers, err = m.Int64ObservableGauge(metricPendingPeers,
		metric.WithDescription("Other data plane processes whose pending prefill counts now (--pending-sync)."))
	add(err)
	for _, e := range errs {
		if e != nil {
			return nil, fmt.Errorf("dataplane: metrics: %w", e)
		}
	}
	out.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		d.observe(o, &obs)
		return nil
	}, obs.picks, obs.fallbacks, obs.retries, obs.denied, obs.unreplayable, obs.shed, obs.refused, obs.requests, obs.throttled, obs.keySource,
		obs.ineligible, obs.version, obs.age, obs.stale, obs.inflight, obs.available, obs.peers)
	if err != nil {
		return nil, fmt.Errorf("dataplane: metrics: %w", err)
	}
	if out.weights, err = registerWeights(m, d); err != nil {
		return nil, err
	}
	return &out, nil
}

// observe reports every asynchronous instrument. It takes d.mu to walk
// the cells, never on the request path.
func (d *DataPlane) observe(o metric.Observer, obs *observables) {
	now := d.now()
	o.ObserveInt64(obs.peers, int64(d.peerCount()))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.order {
		cl := attribute.String("cluster", c.name)
		one := metric.WithAttributes(cl)
		p := c.cur.Load()
		o.ObserveInt64(obs.version, int64(p.version), one)
		o.ObserveFloat64(obs.age, p.age(now).Seconds(), one)
		o.ObserveInt64(obs.stale, boolInt(p.stale), one)
		o.ObserveInt64(obs.retries, c.budget.w.b.Load(), one)
		o.ObserveInt64(obs.denied, c.budget.denied.Load(), one)
		o.ObserveInt64(obs.unreplayable, c.unreplayable.Load(), one)
		o.ObserveInt64(obs.shed, c.shed.Load(), one)
		o.ObserveInt64(obs.refused, c.refused.Load(), one)
		o.ObserveInt64(obs.throttled, c.throttled.Load(), one)
		o.ObserveInt64(obs.ineligible, c.ineligible.Load(), one)
		for f := reasonUnhealthy; f <= reasonIneligible; f++ {
			o.ObserveInt64(obs.fallbacks, c.fallbacks[f].Load(), metric.WithAttributes(cl, attribute.String("reason", f.String())))
		}
		for _, src := range affinity.Sources {
			o.ObserveInt64(obs.keySource, c.keySources[src].Load(), metric.WithAttributes(cl, attribute.String("source", src.String())))
		}
		for code := range c.codes {
			if n := c.codes[code].Load(); n > 0 {
				o.ObserveInt64(obs.requests, n, metric.WithAttributes(cl, attribute.String("code", strconv.Itoa(code))))
			}
		}
		for _, name := range sortedKeys(c.cells) {
			x := c.cells[name]
			two := metric.WithAttributes(cl, attribute.String("engine", name))
			o.ObserveInt64(obs.picks, x.picks.Load(), two)
			o.ObserveInt64(obs.inflight, x.inflight.Load(), two)
		}
		for i := range p.slots {
			s := &p.slots[i]
			o.ObserveInt64(obs.available, boolInt(s.avail), metric.WithAttributes(cl, attribute.String("engine", s.eng.name)))
		}
	}
}

// age is now − created_at of the picker's snapshot, never negative (a
// clock ahead of ours counts as fresh); 0 without a snapshot.
func (p *picker) age(now time.Time) time.Duration {
	if p.err != nil || p.createdAt.IsZero() {
		return 0
	}
	return max(0, now.Sub(p.createdAt))
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
