package optimizer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// cycle runs one solve and, when this instance leads and the result
// differs enough from what is served (or refresh is set, or MaxInterval
// has passed since the last publish), publishes it.
func (o *Optimizer) cycle(ctx context.Context, refresh bool) {
	ctx, span := o.startSolveSpan(ctx)
	defer span.End()
	o.counts.Solves++
	if err := o.sync(ctx); err != nil {
		o.fail(span, err) // the solve can go on from what is known; a publish would fail too
	}
	start := time.Now()
	res, err := o.solve(o.now())
	elapsed := time.Since(start)
	o.met.solveDuration.Record(ctx, elapsed.Seconds())
	if err != nil {
		o.counts.Rejected++
		o.met.rejected.Add(ctx, 1)
		o.fail(span, err)
		o.storeState()
		return
	}
	res.solveMs = float64(elapsed.Microseconds()) / 1000
	o.lastSolve = res
	span.SetAttributes(attribute.Float64("objective_ms", res.sol.ObjectiveMs), attribute.String("inputs_digest", res.digest))
	if o.leading() && (refresh || o.shouldPublish(res)) {
		o.publish(ctx, res)
	}
	o.storeState()
}

func (o *Optimizer) startSolveSpan(ctx context.Context) (context.Context, trace.Span) {
	if o.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, o.parent)
	}
	ctx, span := o.tracer.Start(ctx, "optimizer.solve", trace.WithLinks(o.links...))
	o.parent, o.links = trace.SpanContext{}, nil
	return ctx, span
}

func (o *Optimizer) fail(span trace.Span, err error) {
	o.counts.LastError = err.Error()
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	o.log.Warn("optimizer: solve", "err", err)
}

// shouldPublish: nothing is published yet, the last publish is
// MaxInterval old, or some cluster's weights moved by MinChange or more.
func (o *Optimizer) shouldPublish(res *solveResult) bool {
	if o.prev.version == 0 {
		return true
	}
	if o.cfg.Clock == ClockEvent {
		// MaxInterval of event time since this instance last published
		// (never, for a new leader).
		if o.prevAsOf == 0 || res.asOf-o.prevAsOf >= int64(o.cfg.MaxInterval) {
			return true
		}
	} else if o.now().Sub(o.prev.at) >= o.cfg.MaxInterval {
		return true
	}
	return res.changeFrom(&o.prev) >= o.cfg.MinChange
}

// publish writes res as the next version and, on success, makes it the
// state the next solve starts from. A conflict or a partial write makes
// the next cycle reload the bucket, and asks for that cycle.
func (o *Optimizer) publish(ctx context.Context, res *solveResult) {
	ctx, span := o.tracer.Start(ctx, "optimizer.publish")
	defer span.End()
	snaps := res.snapshots(o.cfg.Fleet)
	pctx, cancel := context.WithTimeout(ctx, o.cfg.PublishTimeout)
	r, err := o.pub.Publish(pctx, snaps)
	cancel()
	span.SetAttributes(attribute.Int64("version", int64(r.Version)))
	switch {
	case errors.Is(err, ErrConflict):
		o.counts.Conflicts++
		o.met.published(ctx, resultConflict)
		o.log.Info("optimizer: another optimizer published first; reloading", "id", o.cfg.ID)
	case err != nil:
		o.met.published(ctx, resultError)
		o.fail(span, err)
	default:
		o.met.published(ctx, resultOK)
		o.commit(ctx, res, snaps, r)
	}
	if err != nil || len(r.Superseded) > 0 {
		o.prev.manifestRev = 0 // reload before the next solve
		o.sched.markDirty(o.now())
	}
}

// commit records a successful publish as the served state.
func (o *Optimizer) commit(ctx context.Context, res *solveResult, out []*schemas.Snapshot, r Result) {
	o.counts.Publishes++
	o.counts.LastError = ""
	snaps := map[string]*schemas.Snapshot{}
	tables := map[string]*sched.Table{}
	for _, p := range out {
		s := *p
		s.Version, s.CreatedAt = r.Version, r.CreatedAt
		snaps[s.Cluster] = &s
	}
	for _, pl := range res.plans {
		if pl.table != nil {
			tables[pl.row] = pl.table
		} else if old := o.prev.tables[pl.row]; old != nil {
			tables[pl.row] = old // all shed: keep the table for when traffic returns
		}
	}
	o.prev = published{version: r.Version, manifestRev: r.ManifestRevision, at: r.CreatedAt,
		snaps: snaps, tables: tables, solution: anchor(o.cfg.Fleet, res.rows, snaps, res.sol.ClusterPriceMs)}
	o.prevAsOf = max(res.asOf, 1)
	o.history = appendHistory(o.history, historyPoint(res, r), o.cfg.HistoryLen)
	o.met.version.Record(ctx, int64(r.Version))
	o.met.objective.Record(ctx, res.sol.ObjectiveMs)
	for _, pl := range res.plans {
		attrs := metric.WithAttributes(res.rowAttrs(o.cfg.Fleet, pl)...)
		o.met.shed.Record(ctx, pl.shed, attrs)
		o.met.demand.Record(ctx, res.demand[pl.row], attrs)
	}
	for _, c := range res.caps {
		o.met.capacity.Record(ctx, c.capacity(), metric.WithAttributes(attribute.String("engine", c.fleet.Name)))
	}
	if len(r.Superseded) > 0 {
		o.log.Info("optimizer: some clusters already had a later version", "version", r.Version, "clusters", r.Superseded)
	}
}

func historyPoint(res *solveResult, r Result) HistoryPoint {
	h := HistoryPoint{Version: r.Version, Time: r.CreatedAt, Weights: map[string]map[string]float64{},
		ShedFraction: map[string]float64{}, DemandRPS: map[string]float64{}}
	for _, pl := range res.plans {
		h.Weights[pl.row] = pl.weights
		h.ShedFraction[pl.row] = pl.shed
		h.DemandRPS[pl.row] = res.demand[pl.row]
	}
	return h
}

// rowAttrs are a row's metric attributes: its cluster and, in a fleet of
// more than one class, its class (schemas.ModelClass.Key).
func (r *solveResult) rowAttrs(f *schemas.Fleet, pl plan) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("cluster", f.Clusters[pl.cluster].Name)}
	if !r.rows.Single {
		rw, _ := r.rows.ByName(pl.row)
		attrs = append(attrs, attribute.String("class", r.rows.ClassKey(r.rows.Rows[rw].Class)))
	}
	return attrs
}

// sync reloads the served state from the bucket when the manifest moved
// since this instance last wrote or read it (another optimizer published,
// or an operator rolled back): the next solve then starts from what the
// data planes serve, and each table is updated from the one they hold.
func (o *Optimizer) sync(ctx context.Context) error {
	man, rev, err := o.pub.Manifest(ctx)
	if err != nil {
		return err
	}
	if rev == o.prev.manifestRev && rev != 0 {
		return nil
	}
	next := published{manifestRev: rev, snaps: map[string]*schemas.Snapshot{}, tables: map[string]*sched.Table{}}
	if man != nil {
		next.version, next.at = man.Version, man.CreatedAt
	}
	for c := range o.cfg.Fleet.Clusters {
		if err := o.loadCluster(ctx, c, &next); err != nil {
			return err
		}
	}
	next.solution = anchor(o.cfg.Fleet, o.rows, next.snaps, nil)
	o.prev = next
	return nil
}

// loadCluster reads cluster c's served snapshot and its rows' tables into
// p. A value that does not decode is skipped: the next publish replaces
// it.
func (o *Optimizer) loadCluster(ctx context.Context, c int, p *published) error {
	cluster := o.cfg.Fleet.Clusters[c].Name
	e, err := o.pub.latest(ctx, cluster)
	if err != nil || e.seq == 0 || e.deleted {
		return err
	}
	s, err := schemas.DecodeSnapshot(e.data)
	if err != nil {
		o.log.Warn("optimizer: served snapshot does not decode; it will be replaced", "cluster", cluster, "err", err)
		return nil
	}
	p.snaps[cluster] = s
	for r, rr := range routing.SnapshotRows(o.cfg.Fleet, o.rows, c, s) {
		name := o.rows.Rows[r].Name
		t, err := servedTable(name, rr)
		if err != nil {
			o.log.Warn("optimizer: served table unusable; building one", "row", name, "err", err)
		}
		if t != nil {
			p.tables[name] = t
		}
	}
	return nil
}

// servedTable is the table a data plane holds for a row of a served
// snapshot: the row's own, or (without one) the one it builds from the
// weights.
func servedTable(row string, rr routing.RowRouting) (*sched.Table, error) {
	if rr.Table != nil {
		t, err := sched.Decode(rr.Table.Slots, rr.Table.Engines, rr.Table.Encoding, rr.Table.Data)
		if err == nil {
			return t, nil
		}
		if len(rr.Weights) == 0 {
			return nil, err
		}
		t, err2 := buildTable(nil, rr.Weights)
		return t, errors.Join(err, err2)
	}
	t, err := buildTable(nil, rr.Weights)
	if err != nil {
		return nil, fmt.Errorf("row %s: %w", row, err)
	}
	return t, nil
}
