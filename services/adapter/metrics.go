package adapter

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names; the Prometheus exporter adds _total (see README.md).
const (
	metricScrapes = "ilb.adapter.scrapes"
	metricEvents  = "ilb.adapter.completions"
	metricDropped = "ilb.adapter.completions_dropped"
	metricSkipped = "ilb.adapter.intervals_skipped"
	scopeName     = "github.com/ilb-router/ilb/services/adapter"
)

type metrics struct {
	scrapes, events, dropped, skips metric.Int64Counter
}

// targetSets are one target's attribute sets, built once.
type targetSets struct {
	ok, failed, engine metric.MeasurementOption
}

func newTargetSets(t Target) targetSets {
	eng := attribute.String("engine", t.Engine)
	return targetSets{ok: metric.WithAttributes(eng, attribute.String("result", "ok")),
		failed: metric.WithAttributes(eng, attribute.String("result", "error")), engine: metric.WithAttributes(eng)}
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter(scopeName)
	var out metrics
	var e1, e2, e3, e4 error
	out.scrapes, e1 = m.Int64Counter(metricScrapes, metric.WithDescription("Scrapes of engines' /metrics, by engine and result (ok, error)."))
	out.events, e2 = m.Int64Counter(metricEvents, metric.WithDescription("Completion events synthesized from metrics, by engine."))
	out.dropped, e3 = m.Int64Counter(metricDropped, metric.WithDescription("Completions over the per-scrape limit, not sent, by engine."))
	out.skips, e4 = m.Int64Counter(metricSkipped, metric.WithDescription("Intervals between two scrapes longer than the max gap, whose completions were not synthesized, by engine."))
	if err := errors.Join(e1, e2, e3, e4); err != nil {
		return nil, err
	}
	return &out, nil
}

func (m *metrics) scrape(ctx context.Context, a *targetSets, ok bool) {
	if ok {
		m.scrapes.Add(ctx, 1, a.ok)
		return
	}
	m.scrapes.Add(ctx, 1, a.failed)
}

func (m *metrics) completions(ctx context.Context, a *targetSets, sent, dropped int) {
	m.events.Add(ctx, int64(sent), a.engine)
	if dropped > 0 {
		m.dropped.Add(ctx, int64(dropped), a.engine)
	}
}

func (m *metrics) skipped(ctx context.Context, a *targetSets) { m.skips.Add(ctx, 1, a.engine) }

func kafkaHeader(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
