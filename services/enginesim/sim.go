package enginesim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/solver/engine"
)

// Sim runs simulated engines behind one HTTP listener.
type Sim struct {
	cfg     Config
	log     *slog.Logger
	prop    propagation.TextMapPropagator
	set     atomic.Pointer[engineSet] // the engines served now (fleet.go)
	filler  string
	signals *signals
	metrics *metrics
	srv     *run.Server // nil without HTTPAddr
	handler http.Handler

	// clock is set by Run before the owners start and read-only after.
	clock virtualClock

	started  chan struct{} // closed when Run starts the owners
	stopping chan struct{} // closed when Run begins shutting down
	stopOnce sync.Once
	ran      atomic.Bool

	// mu orders fleet changes (SetFleet) with Run starting and stopping
	// the owners.
	mu        sync.Mutex
	ownersCtx context.Context // set by Run under mu
	owners    sync.WaitGroup
	closed    bool   // Run is stopping the owners: start no more
	retired   counts // requests of engines forgotten since New
}

// simEngine is one engine: what its owner publishes and the channels to
// reach it.
type simEngine struct {
	name   string
	spec   atomic.Pointer[engineSpec] // replaced by a fleet change
	key    []byte                     // Kafka record key
	seed   uint64
	submit chan *call
	faults chan faultReq
	attrs  engineSets // metric attribute sets

	// Fleet changes (fleet.go), sent to the owner.
	respec  chan struct{} // the spec changed
	retire  chan struct{} // closed when a removed engine's drain time is over
	retired bool          // retire is closed (under Sim.mu)
	// stopped is closed when the owner has stopped and answered every
	// call it held; handlers waiting on the engine give up then.
	stopped chan struct{}
	cancel  context.CancelFunc // stops the owner at once (set under Sim.mu)
	// draining is set under Sim.mu while the engine is removed from the
	// fleet and still serves; drainTimer ends the drain.
	draining   atomic.Bool
	drainTimer *time.Timer

	// Published by the owner after every change.
	healthy              atomic.Bool
	ready, total         atomic.Int64
	running, waiting     atomic.Int64
	kvUtil               atomicFloat
	slowdown, errorRate  atomicFloat
	stepWallNs           atomic.Int64
	served, failed, shed atomic.Uint64
}

// count tallies a finished request by outcome: failed are the model's
// injected errors, shed the requests refused (unhealthy, no replica,
// queue full, shutdown).
func (e *simEngine) count(errText string) {
	switch errText {
	case "":
		e.served.Add(1)
	case engine.ErrorInjected:
		e.failed.Add(1)
	default:
		e.shed.Add(1)
	}
}

// New validates cfg, builds the engines and, with cfg.HTTPAddr set, binds
// the listener (so BaseURL works before Run). Call Run once.
func New(cfg Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	specs, _ := cfg.engineSpecs()
	s := &Sim{cfg: cfg, log: cfg.Logger, prop: cfg.Propagator,
		filler: filler(cfg.MaxOutputTokens), started: make(chan struct{}), stopping: make(chan struct{})}
	s.defaults()
	set := &engineSet{fleet: cfg.Fleet, byName: map[string]*simEngine{}}
	for _, sp := range specs {
		set.add(s.newEngine(sp))
	}
	s.set.Store(set)
	var err error
	if s.signals, err = newSignals(cfg, s.prop); err != nil {
		return nil, err
	}
	if s.metrics, err = newMetrics(s.cfg.MeterProvider, s); err != nil {
		s.signals.close()
		return nil, err
	}
	s.handler = s.routes()
	if cfg.HTTPAddr != "" {
		if s.srv, err = run.Listen(run.DefaultHTTPConfig(cfg.HTTPAddr), s.handler); err != nil {
			s.signals.close()
			return nil, fmt.Errorf("enginesim: %w", err)
		}
	}
	return s, nil
}

func (s *Sim) defaults() {
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.prop == nil {
		s.prop = otel.GetTextMapPropagator()
	}
	if s.cfg.MeterProvider == nil {
		s.cfg.MeterProvider = noop.NewMeterProvider()
	}
	if s.cfg.TracerProvider == nil {
		s.cfg.TracerProvider = tracenoop.NewTracerProvider()
	}
}

func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// Handler serves the engines' HTTP API (README.md); it is what New
// listens with. Requests wait until Run starts.
func (s *Sim) Handler() http.Handler { return s.handler }

// Addr is the bound listen address, "" without HTTPAddr.
func (s *Sim) Addr() string {
	if s.srv == nil {
		return ""
	}
	return s.srv.Addr()
}

// BaseURL is engine's OpenAI-compatible base URL on the listener
// (http://ADDR/engines/NAME); "" without a listener.
func (s *Sim) BaseURL(engine string) string {
	if s.srv == nil {
		return ""
	}
	return "http://" + s.srv.Addr() + "/engines/" + engine
}

// EngineNames returns the simulated engines' names in fleet order, those
// still draining after their removal from the fleet last.
func (s *Sim) EngineNames() []string {
	list := s.set.Load().list
	names := make([]string, len(list))
	for i, e := range list {
		names[i] = e.name
	}
	return names
}

// Run starts the engines and the listener and serves until ctx ends. On
// the way out it refuses new requests, answers waiting ones with 503,
// stops the engines and flushes the signals still buffered (bounded by
// the producer's close timeout).
func (s *Sim) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("enginesim: Run called twice")
	}
	defer s.signals.close()
	s.clock = virtualClock{start: time.Now(), scale: s.cfg.TimeScale}
	ownersCtx, stopOwners := context.WithCancel(context.WithoutCancel(ctx))
	defer stopOwners()
	s.mu.Lock()
	list := s.set.Load().list
	owners := make([]*owner, len(list))
	for i, e := range list {
		o, err := newOwner(s, e)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		owners[i] = o
	}
	s.ownersCtx = ownersCtx
	for _, o := range owners {
		s.startOwner(o)
	}
	s.mu.Unlock()
	close(s.started)
	var wg sync.WaitGroup
	wg.Go(func() { s.signals.ensureTopic(ownersCtx, s.log) })
	err := s.serve(ctx)
	s.stop()
	s.mu.Lock()
	s.closed = true
	for _, e := range s.set.Load().list {
		if e.drainTimer != nil {
			e.drainTimer.Stop()
		}
	}
	s.mu.Unlock()
	stopOwners()
	s.owners.Wait()
	wg.Wait()
	s.metrics.close()
	return err
}

// serve runs the listener (or just waits) until ctx ends. Handlers
// waiting on an engine return when stopping closes, so stopping is closed
// before the server's graceful shutdown, which then does not wait for
// long generations.
func (s *Sim) serve(ctx context.Context) error {
	if s.srv == nil {
		<-ctx.Done()
		return nil
	}
	srvCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Run(srvCtx) }()
	select {
	case err := <-errc:
		return fmt.Errorf("enginesim: %w", err)
	case <-ctx.Done():
	}
	s.stop()
	cancel()
	if err := <-errc; err != nil {
		return fmt.Errorf("enginesim: shut down: %w", err)
	}
	return nil
}

func (s *Sim) stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// Ready is closed once Run has started the engines; InjectFault before
// then returns ErrNotRunning.
func (s *Sim) Ready() <-chan struct{} { return s.started }

// InjectFault changes engine's behaviour (see Fault). It waits until the
// engine applied it.
func (s *Sim) InjectFault(engine string, f Fault) error {
	return s.injectFault(context.Background(), engine, f, false)
}

// ClearFaults removes every fault of engine and its pending reverts.
func (s *Sim) ClearFaults(engine string) error {
	return s.injectFault(context.Background(), engine, Fault{}, true)
}

func (s *Sim) injectFault(ctx context.Context, name string, f Fault, reset bool) error {
	e := s.set.Load().byName[name]
	if e == nil {
		return fmt.Errorf("%w %q", ErrUnknownEngine, name)
	}
	select {
	case <-s.started:
	default:
		return ErrNotRunning
	}
	req := faultReq{f: f, reset: reset, reply: make(chan error, 1)}
	select {
	case e.faults <- req:
	case <-s.stopping:
		return ErrNotRunning
	case <-e.stopped:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-req.reply
}

// Stats are a Sim's counters since New.
type Stats struct {
	Served  uint64 // requests answered with a completion
	Failed  uint64 // requests failed by an injected error (500)
	Shed    uint64 // requests refused: unhealthy, no ready replica, queue full, shutdown (503)
	Signals SignalStats
}

// Stats returns the totals over all engines, those forgotten after a
// fleet change included.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	c := s.retired
	for _, e := range s.set.Load().list {
		c.add(e)
	}
	s.mu.Unlock()
	return Stats{Served: c.served, Failed: c.failed, Shed: c.shed, Signals: s.signals.stats()}
}

// counts are requests by outcome.
type counts struct{ served, failed, shed uint64 }

func (c *counts) add(e *simEngine) {
	c.served += e.served.Load()
	c.failed += e.failed.Load()
	c.shed += e.shed.Load()
}
