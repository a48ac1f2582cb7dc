package dataplane

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const metricWeight = "ilb_dataplane_weight"

// registerWeights reports ilb_dataplane_weight: each engine's weight in
// the snapshot each cluster serves (the dashboard's weights panel). It
// reads the snapshots under d.mu, at collection time only.
func registerWeights(m metric.Meter, d *DataPlane) (metric.Registration, error) {
	g, err := m.Float64ObservableGauge(metricWeight,
		metric.WithDescription("Weight of the engine in the snapshot served for the cluster, 0..1."))
	if err != nil {
		return nil, fmt.Errorf("dataplane: metrics: %w", err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, c := range d.order {
			if c.snap == nil {
				continue
			}
			cl := attribute.String("cluster", c.name)
			for _, name := range sortedKeys(c.snap.Weights) {
				o.ObserveFloat64(g, c.snap.Weights[name], metric.WithAttributes(cl, attribute.String("engine", name)))
			}
		}
		return nil
	}, g)
	if err != nil {
		return nil, fmt.Errorf("dataplane: metrics: %w", err)
	}
	return reg, nil
}
