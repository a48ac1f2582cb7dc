package traffic

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names; the Prometheus exporter makes them
// ilb_traffic_requests_total, ilb_traffic_good_total,
// ilb_traffic_conversations_total and ilb_traffic_in_flight.
const (
	metricRequests      = "ilb.traffic.requests"
	metricGood          = "ilb.traffic.good"
	metricConversations = "ilb.traffic.conversations"
	metricInFlight      = "ilb.traffic.in_flight"
	scopeName           = "github.com/ilb-router/ilb/services/traffic"
)

// metrics reports the counters from one callback at collection time.
type metrics struct {
	reg metric.Registration
}

func newMetrics(mp metric.MeterProvider, g *Generator) (*metrics, error) {
	m := mp.Meter(scopeName)
	req, err := m.Int64ObservableCounter(metricRequests,
		metric.WithDescription("Requests the traffic generator sent, by cluster and result (ok, shed, error, dropped)."))
	if err != nil {
		return nil, err
	}
	good, err := m.Int64ObservableCounter(metricGood,
		metric.WithDescription("Answered requests served within the fleet's SLO (TTFT and mean TBOT), by cluster: goodput."))
	if err != nil {
		return nil, err
	}
	conv, err := m.Int64ObservableCounter(metricConversations,
		metric.WithDescription("Conversations the traffic generator started, by cluster."))
	if err != nil {
		return nil, err
	}
	infl, err := m.Int64ObservableGauge(metricInFlight,
		metric.WithDescription("Requests outstanding, by cluster."))
	if err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, c := range g.clusters {
			cl := attribute.String("cluster", c.name)
			for _, r := range []struct {
				result string
				n      int64
			}{{"ok", c.ok.Load()}, {"shed", c.shed.Load()}, {"error", c.errs.Load()}, {"dropped", c.dropped.Load()}} {
				o.ObserveInt64(req, r.n, metric.WithAttributes(cl, attribute.String("result", r.result)))
			}
			o.ObserveInt64(good, c.good.Load(), metric.WithAttributes(cl))
			o.ObserveInt64(conv, c.convs.Load(), metric.WithAttributes(cl))
			o.ObserveInt64(infl, c.inFlight.Load(), metric.WithAttributes(cl))
		}
		return nil
	}, req, good, conv, infl)
	if err != nil {
		return nil, err
	}
	return &metrics{reg: reg}, nil
}

func (m *metrics) close() { _ = m.reg.Unregister() }
