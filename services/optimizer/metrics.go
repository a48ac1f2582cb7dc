package optimizer

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Values of the result label of ilb_optimizer_publish_total
// (deploy/METRICS.md).
const (
	resultOK       = "ok"
	resultConflict = "conflict"
	resultError    = "error"
)

// solveBuckets are the histogram buckets of
// ilb_optimizer_solve_duration_seconds (deploy/METRICS.md).
var solveBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// metrics are the optimizer's instruments. The first three are the
// contract of deploy/METRICS.md; the rest are extra.
type metrics struct {
	solveDuration metric.Float64Histogram // ilb_optimizer_solve_duration_seconds
	version       metric.Int64Gauge       // ilb_optimizer_snapshot_version
	publish       metric.Int64Counter     // ilb_optimizer_publish_total{result}
	casConflicts  metric.Int64Counter     // ilb_optimizer_cas_conflicts_total
	rejected      metric.Int64Counter     // ilb_optimizer_solve_rejected_total
	inputRejected metric.Int64Counter     // ilb_optimizer_inputs_rejected_total{reason}
	objective     metric.Float64Gauge     // ilb_optimizer_objective_ms
	shed          metric.Float64Gauge     // ilb_optimizer_shed_fraction{cluster}
	demand        metric.Float64Gauge     // ilb_optimizer_demand_rps{cluster}
	capacity      metric.Float64Gauge     // ilb_optimizer_capacity_rps{engine}
	leader        metric.Int64Gauge       // ilb_optimizer_leader
	lateRows      metric.Int64Counter     // ilb_optimizer_late_rows_total
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/ilb-router/ilb/services/optimizer")
	var errs [12]error
	var x metrics
	x.solveDuration, errs[0] = m.Float64Histogram("ilb.optimizer.solve_duration", metric.WithUnit("s"),
		metric.WithDescription("Wall time of one solve, inputs read to weights out."),
		metric.WithExplicitBucketBoundaries(solveBuckets...))
	x.version, errs[1] = m.Int64Gauge("ilb.optimizer.snapshot_version",
		metric.WithDescription("Fleet-wide version of the last snapshot published."))
	x.publish, errs[2] = m.Int64Counter("ilb.optimizer.publish",
		metric.WithDescription("Snapshot publishes by result: ok, conflict (compare-and-swap lost) or error."))
	x.casConflicts, errs[3] = m.Int64Counter("ilb.optimizer.cas_conflicts",
		metric.WithDescription("Publishes that lost the manifest compare-and-swap to another optimizer."))
	x.rejected, errs[4] = m.Int64Counter("ilb.optimizer.solve_rejected",
		metric.WithDescription("Solves whose result failed validation or could not be solved; nothing was published."))
	x.inputRejected, errs[5] = m.Int64Counter("ilb.optimizer.inputs_rejected",
		metric.WithDescription("Feature and profile rows or records refused, by reason."))
	x.objective, errs[6] = m.Float64Gauge("ilb.optimizer.objective_ms",
		metric.WithDescription("Mean end-to-end latency of the last solution, shed counted at its penalty, ms."))
	x.shed, errs[7] = m.Float64Gauge("ilb.optimizer.shed_fraction",
		metric.WithDescription("Shed fraction of each cluster in the last snapshot."))
	x.demand, errs[8] = m.Float64Gauge("ilb.optimizer.demand_rps",
		metric.WithDescription("Estimated demand of each cluster, requests per second."))
	x.capacity, errs[9] = m.Float64Gauge("ilb.optimizer.capacity_rps",
		metric.WithDescription("Derated capacity of each engine in the last solve, requests per second."))
	x.leader, errs[10] = m.Int64Gauge("ilb.optimizer.leader",
		metric.WithDescription("1 while this instance holds the leader lease (or election is off)."))
	x.lateRows, errs[11] = m.Int64Counter("ilb.optimizer.late_rows",
		metric.WithDescription("Feature rows that arrived after the event clock solved their window; they count from the next solve."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return &x, nil
}

func (m *metrics) published(ctx context.Context, result string) {
	m.publish.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
	if result == resultConflict {
		m.casConflicts.Add(ctx, 1)
	}
}

func (m *metrics) inputsRejected(ctx context.Context, reason string, n uint64) {
	if n > 0 {
		m.inputRejected.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
	}
}
