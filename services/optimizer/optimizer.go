package optimizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/sched"
	"github.com/ilb-router/ilb/streams/kv"
)

// inboxSize bounds decoded input batches waiting for the solve loop.
const inboxSize = 64

// maxLinks bounds the span links of one solve to the records that
// triggered it.
const maxLinks = 32

// Optimizer solves the fleet's allocation and publishes weight snapshots.
type Optimizer struct {
	// Fixed at New.
	cfg     Config
	deps    Deps
	log     *slog.Logger
	now     func() time.Time
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	met     *metrics
	health  *run.Health
	handler http.Handler

	// Shared: channels into the loop, and what the loop publishes.
	inbox       chan input    // decoded records from the consumers
	trigger     chan struct{} // capacity 1: coalesced solve requests
	state       atomic.Pointer[State]
	leaderUntil atomic.Int64 // unix ns until which this instance leads

	// Set by Run before its goroutines start; safe for concurrent use.
	pub *Publisher

	// Owned by the solve loop.
	rows      *routing.Rows // the fleet's demand rows (cluster, class)
	in        *inputs
	ticks     *ticks // the event clock's queue (ClockEvent)
	dem       *demand
	shape     *shape
	prev      published
	prevAsOf  int64           // asOf of this instance's last publish (1 when it had none)
	release   routing.Release // when smoothing a shedding row stops
	sched     schedule
	parent    trace.SpanContext // latest record that triggered the next solve
	links     []trace.Link      // the others
	history   []HistoryPoint
	counts    State // counters and last error carried between States
	lastSolve *solveResult
	// solver keeps the solver's model between solves of one fleet
	// (Resolve); setFleet starts a new one, since a fleet's network
	// times can change without its names changing.
	solver optimize.Solver
}

// input is one decoded record for the solve loop.
type input struct {
	features []schemas.Feature
	profiles []schemas.Profile
	asOf     int64 // profiles: event time of the windows the fit saw
	src      int32 // features: signals partition of the rows (schemas.HeaderWindow); -1 unknown
	profAsOf int64 // features: latest profiles record the aggregator had queued (schemas.HeaderProfilesAsOf)
	span     trace.SpanContext
	fleet    *schemas.Fleet // a new fleet file (SetFleet); nothing else set
}

// published is the last state of the bucket this instance knows: what the
// data planes serve, and what the next solve starts from.
type published struct {
	version     uint64
	manifestRev uint64
	at          time.Time
	snaps       map[string]*schemas.Snapshot // by cluster
	tables      map[string]*sched.Table      // by demand row name
	solution    *optimize.Solution           // the anchor of the churn term, by row name
}

// New checks cfg and returns an Optimizer. Run starts it.
func New(cfg Config, deps Deps) (*Optimizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	met, err := newMetrics(deps.Meter)
	if err != nil {
		return nil, fmt.Errorf("optimizer: metrics: %w", err)
	}
	o := &Optimizer{
		cfg: cfg, deps: deps, met: met, log: deps.Logger, now: deps.Now, prop: deps.Propagator,
		health: deps.Health, inbox: make(chan input, inboxSize), trigger: make(chan struct{}, 1),
		rows: routing.NewRows(cfg.Fleet), in: newInputs(cfg.Fleet), ticks: newTicks(cfg.Fleet, cfg.TickWait), dem: newDemand(cfg.Demand),
		shape: newShape(cfg.ShapeAlpha, cfg.ShapeOutputAlpha, cfg.MeanPromptTokens, cfg.Fleet),
	}
	o.setDefaults()
	o.handler = o.newHandler()
	o.state.Store(&State{ID: cfg.ID, Clusters: []ClusterState{}, Engines: []EngineState{}, History: []HistoryPoint{}})
	return o, nil
}

func (o *Optimizer) setDefaults() {
	d := run.Deps{Logger: o.deps.Logger, Meter: o.deps.Meter, Tracer: o.deps.Tracer,
		Propagator: o.deps.Propagator, Health: o.deps.Health, Now: o.deps.Now}.WithDefaults()
	o.log, o.now, o.prop, o.health, o.deps.Meter = d.Logger, d.Now, d.Propagator, d.Health, d.Meter
	o.tracer = d.Tracer.Tracer("github.com/ilb-router/ilb/services/optimizer")
}

// State returns what the optimizer last did. Safe for concurrent use.
func (o *Optimizer) State() *State { return o.state.Load() }

// Trigger asks for a solve as soon as the minimum interval allows. Calls
// coalesce: many triggers before the solve cause one solve.
func (o *Optimizer) Trigger() {
	select {
	case o.trigger <- struct{}{}:
	default:
	}
}

// Handler serves GET /v1/optimizer (the State as JSON), GET /healthz and,
// when Deps.Metrics is set, GET /metrics.
func (o *Optimizer) Handler() http.Handler { return o.handler }

func (o *Optimizer) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/optimizer", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(o.State())
	})
	mux.Handle("GET /healthz", o.health)
	if o.deps.Metrics != nil {
		mux.Handle("GET /metrics", o.deps.Metrics)
	}
	return mux
}

// Run opens the weights bucket (waiting for NATS), then consumes
// features and profiles, keeps the leader lease, and solves and publishes
// until ctx ends (it returns nil) or a part fails.
func (o *Optimizer) Run(ctx context.Context) error {
	switch {
	case o.deps.JetStream == nil:
		return errors.New("optimizer: no JetStream connection")
	case o.deps.Kafka == nil:
		return errors.New("optimizer: no Kafka configuration")
	}
	if err := o.open(ctx); err != nil {
		return err
	}
	var g run.Group
	g.Add("features", func(ctx context.Context) error {
		return o.consume(ctx, o.cfg.FeaturesTopic, featuresStart(o.cfg.FeatureBacklogRecords), o.decodeFeatures)
	})
	g.Add("profiles", func(ctx context.Context) error {
		return o.consume(ctx, o.cfg.ProfilesTopic, profilesStart(), o.decodeProfiles)
	})
	if o.cfg.LeaseDuration > 0 {
		g.Add("lease", o.runLease)
	}
	g.Add("solve", o.loop)
	return g.Run(ctx)
}

// open creates (or updates) the weights bucket and loads the snapshots
// the data planes serve, retrying with backoff while NATS is unreachable.
// A connection closed for good (the server refused the credentials, say)
// would never open it: open logs why once, at Error with what to check,
// marks /healthz unready, and returns the server's reason.
func (o *Optimizer) open(ctx context.Context) error {
	pause := 100 * time.Millisecond
	for {
		err := o.tryOpen(ctx)
		if err == nil {
			o.health.Set("optimizer bucket", true)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		o.health.Set("optimizer bucket", false)
		if cerr := o.closedConn(err); cerr != nil {
			return o.giveUp(cerr)
		}
		o.log.Warn("optimizer: weights bucket not ready; retrying", "bucket", o.cfg.Bucket, "err", err, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// closedConn returns why the NATS connection is closed for good
// (kv.ConnError: the server's reason and a hint), or nil while it may
// still come back. Without Deps.NATS, an error saying the connection is
// closed is all there is to go on.
func (o *Optimizer) closedConn(err error) error {
	if nc := o.deps.NATS; nc != nil {
		if nc.IsClosed() {
			return kv.ConnError(nc)
		}
		return nil
	}
	if errors.Is(err, nats.ErrConnectionClosed) {
		return err
	}
	return nil
}

// giveUp reports a NATS connection that will never open the bucket: at
// Error once, on /healthz (unready) and in State.LastError, and as Run's
// error, so that ilb optimizer exits with the reason.
func (o *Optimizer) giveUp(cerr error) error {
	err := fmt.Errorf("optimizer: weights bucket %s: %w", o.cfg.Bucket, cerr)
	o.log.Error("optimizer: NATS connection closed; the weights bucket cannot be opened, stopping",
		"bucket", o.cfg.Bucket, "err", cerr)
	o.health.SetReason("optimizer nats", false, cerr.Error())
	o.counts.LastError = err.Error()
	o.storeState()
	return err
}

func (o *Optimizer) tryOpen(ctx context.Context) error {
	if _, err := EnsureWeightsBucket(ctx, o.deps.JetStream, o.cfg.Bucket, o.cfg.BucketReplicas); err != nil {
		return err
	}
	pub, err := NewPublisher(ctx, o.deps.JetStream, PublisherConfig{Bucket: o.cfg.Bucket, ID: o.cfg.ID, Now: o.now, Propagator: o.prop})
	if err != nil {
		return err
	}
	o.pub = pub
	return o.sync(ctx)
}

// leading reports whether this instance may publish now.
func (o *Optimizer) leading() bool {
	if o.cfg.LeaseDuration == 0 {
		return true
	}
	return o.now().UnixNano() < o.leaderUntil.Load()
}
