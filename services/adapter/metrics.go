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
	// Per target: attribute sets built once.
	ok, failed, engine []metric.MeasurementOption
}

func newMetrics(mp metric.MeterProvider, targets []Target) (*metrics, error) {
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
	for _, t := range targets {
		eng := attribute.String("engine", t.Engine)
		out.ok = append(out.ok, metric.WithAttributes(eng, attribute.String("result", "ok")))
		out.failed = append(out.failed, metric.WithAttributes(eng, attribute.String("result", "error")))
		out.engine = append(out.engine, metric.WithAttributes(eng))
	}
	return &out, nil
}

func (m *metrics) scrape(ctx context.Context, i int, ok bool) {
	if ok {
		m.scrapes.Add(ctx, 1, m.ok[i])
		return
	}
	m.scrapes.Add(ctx, 1, m.failed[i])
}

func (m *metrics) completions(ctx context.Context, i, sent, dropped int) {
	m.events.Add(ctx, int64(sent), m.engine[i])
	if dropped > 0 {
		m.dropped.Add(ctx, int64(dropped), m.engine[i])
	}
}

func (m *metrics) skipped(ctx context.Context, i int) { m.skips.Add(ctx, 1, m.engine[i]) }

func kafkaHeader(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
