package aggregator

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/run"
)

// Aggregator turns the signals topic into windowed features and fitted
// profiles (package doc).
type Aggregator struct {
	// Fixed at New.
	cfg     Config
	deps    Deps
	log     *slog.Logger
	now     func() time.Time
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	health  *run.Health
	cnt     *counters
	reg     metric.Registration
	hist    *history
	handler http.Handler
	refit   chan struct{} // capacity 1: coalesced refit requests

	// Guarded by mu: the consumer loop holds it while it handles a batch,
	// franz-go's group callbacks while they assign or revoke partitions.
	mu         sync.Mutex
	core       *core
	featFile   *rollingFile // nil without OutDir
	lastCommit time.Time
	paused     bool // fetching stopped by backpressureLocked
	// emitted is the latest window end each owned partition emitted, and
	// nextFit the event clock's next refit time (0: not known yet).
	emitted map[int32]int64
	nextFit int64
	// lastFitAt is the as-of of the newest fit this instance made or took
	// over (fitter.go).
	lastFitAt int64

	// fleetEngines are the engines of the fleet in force (SetFleet);
	// guarded by mu.
	fleetEngines map[string]bool

	// rb follows what the group published (readback.go); set by Run
	// before the consumer starts, nil in tests that drive the core.
	rb *readback
	// fitter: this instance owns signals partition 0 and fits for the
	// group (fitter.go). Set by the group callbacks, read by the loops.
	fitter      atomic.Bool
	fitterSince time.Time // guarded by mu

	// noCommit makes commits do nothing: tests use it to stop an
	// aggregator as a crash would, with work done but not committed.
	noCommit atomic.Bool

	// Owned by the profile loop (wall clock), or guarded by mu (event
	// clock: the consumer loop fits).
	prof     *profiler
	profFile *rollingFile
	pending  bool // accepted profiles not yet published
	// profNext is a fleet change the profiler has not taken yet
	// (fleet.go); any goroutine sets it, the profiler's owner takes it.
	profNext atomic.Pointer[profilerUpdate]

	// Read by HTTP handlers.
	latest   atomic.Pointer[FeaturesView]
	profiles atomic.Pointer[ProfilesView]
}

// New validates cfg and returns an Aggregator that has consumed nothing.
func New(cfg Config, deps Deps) (*Aggregator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Aggregator{cfg: cfg, deps: deps, cnt: newCounters(), refit: make(chan struct{}, 1), emitted: map[int32]int64{}}
	a.setDefaults()
	a.hist = newHistory(cfg.HistoryWindows, cfg.MaxEngines, int64(cfg.Window))
	a.core = newCore(cfg, a, a.cnt)
	a.prof = newProfiler(cfg)
	a.fleetEngines = map[string]bool{}
	for name := range cfg.Replicas {
		a.fleetEngines[name] = true
	}
	if cfg.OutDir != "" {
		a.featFile = newRollingFile(cfg.OutDir, "features", schemas.FeatureSchema, cfg.FileRollInterval)
		a.profFile = newRollingFile(cfg.OutDir, "profiles", schemas.ProfileSchema, cfg.FileRollInterval)
	}
	reg, err := registerMetrics(a.deps.Meter, a.cnt)
	if err != nil {
		return nil, err
	}
	a.reg = reg
	a.latest.Store(&FeaturesView{Rows: []FeatureJSON{}})
	a.profiles.Store(&ProfilesView{Profiles: []ProfileJSON{}, Fits: []FitResult{}})
	a.health.Set("consumer", false)
	a.handler = a.routes()
	return a, nil
}

func (a *Aggregator) setDefaults() {
	d := run.Deps{Logger: a.deps.Logger, Meter: a.deps.Meter, Tracer: a.deps.Tracer,
		Propagator: a.deps.Propagator, Health: a.deps.Health, Now: a.deps.Now}.WithDefaults()
	a.log, a.now, a.prop, a.health, a.deps.Meter = d.Logger, d.Now, d.Propagator, d.Health, d.Meter
	a.tracer = d.Tracer.Tracer(instrumentationLib)
}

// Handler serves /healthz, /metrics (when Deps.Metrics is set),
// /v1/features and /v1/profiles (README.md, HTTP).
func (a *Aggregator) Handler() http.Handler { return a.handler }

// Health returns the readiness reported on /healthz.
func (a *Aggregator) Health() *run.Health { return a.health }

// Refit asks the profile loop to refit now rather than at the next
// interval. Requests made while one is pending coalesce.
func (a *Aggregator) Refit() {
	select {
	case a.refit <- struct{}{}:
	default:
	}
}

// Run consumes, aggregates, publishes and fits until ctx ends or the
// Kafka client fails for good. On the way out it publishes what is
// pending, commits, leaves the group and closes its output files; windows
// still open are not emitted: the next owner of their partitions rebuilds
// them from the committed offsets (package doc).
func (a *Aggregator) Run(ctx context.Context) error {
	defer a.reg.Unregister()
	rb := a.newReadback()
	a.rb = rb
	k, err := a.connect(ctx)
	if err != nil {
		return err
	}
	var g run.Group
	g.Add("read-back", rb.run)
	g.Add("consumer", func(ctx context.Context) error { return a.consume(ctx, k) })
	if a.cfg.Clock == ClockWall {
		g.Add("profiles", func(ctx context.Context) error { return a.profileLoop(ctx, k) })
	}
	err = g.Run(ctx)
	return errors.Join(err, a.shutdown(k))
}

// window is the sink of emitted windows, called by the consumer loop with
// a.mu held: output file, latest view, TTFT gauge, profile history.
func (a *Aggregator) window(p int32, rows []schemas.Feature) {
	a.emitted[p] = max(a.emitted[p], rows[0].WindowEndUnixNano)
	if a.featFile != nil {
		rec := schemas.FeaturesToRecord(nil, rows)
		if err := a.featFile.write(rec, a.now()); err != nil {
			a.log.Error("aggregator: features file", "err", err)
		}
		rec.Release()
	}
	for i := range rows {
		r := &rows[i]
		if r.Cluster == "" && r.Requests > 0 {
			a.cnt.setP99(r.Engine, r.TTFTP99Ms)
		}
		a.hist.addRow(r)
	}
	a.updateLatest(rows)
}

// updateLatest keeps the rows of the latest window end seen, merging the
// rows of that window from every partition.
func (a *Aggregator) updateLatest(rows []schemas.Feature) {
	cur := a.latest.Load()
	end := rows[0].WindowEndUnixNano
	if end < cur.endNs {
		return
	}
	next := &FeaturesView{endNs: end, WindowStart: time.Unix(0, rows[0].WindowStartUnixNano).UTC(), WindowEnd: time.Unix(0, end).UTC()}
	if end == cur.endNs {
		next.Rows = append(next.Rows, cur.Rows...)
	}
	for i := range rows {
		next.Rows = append(next.Rows, featureJSON(&rows[i]))
	}
	slices.SortStableFunc(next.Rows, func(x, y FeatureJSON) int {
		if c := strings.Compare(x.Engine, y.Engine); c != 0 {
			return c
		}
		return strings.Compare(x.Cluster, y.Cluster)
	})
	next.Rows = slices.CompactFunc(next.Rows, func(x, y FeatureJSON) bool { return x.Engine == y.Engine && x.Cluster == y.Cluster })
	a.latest.Store(next)
}
