package dataplane

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/solver/sched"
	"github.com/ilb-router/ilb/streams/kafka"
)

// Deps are the live dependencies of a DataPlane. Every field is optional.
type Deps struct {
	Logger     *slog.Logger                  // nil discards logs
	Tracer     trace.TracerProvider          // nil: no spans
	Meter      metric.MeterProvider          // nil: no metrics
	Propagator propagation.TextMapPropagator // nil: otel's global propagator
	Metrics    http.Handler                  // served on GET /metrics when set
	Weights    jetstream.KeyValue            // the weights bucket: watched by Run
	JetStream  jetstream.JetStream           // else: Run opens Config.Bucket here, waiting for it to exist
	NATS       *nats.Conn                    // their connection: re-watch as soon as it reconnects
	Kafka      *kafka.ClientConfig           // engine status events: consumed by Run
	Transport  http.RoundTripper             // to the engines; nil: a tuned http.Transport
	Now        func() time.Time              // nil: time.Now
	Rand       func() float64                // uniform in [0,1); nil: math/rand/v2
	Health     *run.Health                   // readiness is reported here; nil: a private one
}

// DataPlane routes requests of one or more front-end clusters.
type DataPlane struct {
	// Fixed at New.
	cfg       Config
	deps      Deps
	log       *slog.Logger
	now       func() time.Time
	rand      func() float64
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	client    *http.Client      // probes
	transport http.RoundTripper // proxied requests, sent without a Client
	clusters  map[string]*cluster
	order     []*cluster // by name
	single    *cluster   // the default cluster: the only one served, or Config.DefaultCluster
	health    *run.Health
	metrics   *metrics
	handler   http.Handler
	// endpoints are the configured engines' host:port and host, for
	// recognising an endpoint picker's subset hints; replaced when the
	// fleet file changes (fleet.go).
	endpoints atomic.Pointer[map[string]bool]
	// cat is what the fleet says the engines serve (models.go); replaced
	// under mu by UpdateModels, read on the request path.
	cat atomic.Pointer[catalog]

	// Hot path.
	epoch atomic.Uint32 // conversation-memory epoch, advanced by the owner tick
	kick  chan struct{} // capacity 1: wakes the owner to eject

	// Guarded by mu: every state change.
	mu        sync.Mutex
	reg       *registry
	pending   *pendingSync  // pending prefill shared with the other data planes (pending_sync.go)
	needURL   bool          // engines without a URL are unavailable (some URL was configured)
	updater   sched.Updater // working memory of the table updates of every swap
	lastSweep time.Time
	started   time.Time
}

// New validates cfg and returns a DataPlane with no snapshot: until one
// arrives every pick fails with ErrNoSnapshot (503).
func New(cfg Config, deps Deps) (*DataPlane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &DataPlane{cfg: cfg, deps: deps, kick: make(chan struct{}, 1), clusters: map[string]*cluster{}}
	d.setDefaults()
	d.reg = newRegistry(cfg.EngineURLs, cfg.EngineCapacity)
	d.pending = &pendingSync{source: newPendingSource(), peers: map[string]peerPending{}}
	d.setEndpoints(cfg.EngineURLs)
	d.cat.Store(newCatalog(cfg.EngineModels, cfg.EngineMaxContext, cfg.DefaultModel))
	d.needURL = len(cfg.EngineURLs) > 0
	for _, name := range sortedKeys(cfg.EngineURLs) {
		d.reg.getLocked(name) // stable ids for configured engines
	}
	names := slices.Sorted(slices.Values(cfg.Clusters))
	for _, name := range names {
		c := newCluster(name, cfg)
		d.clusters[name] = c
		d.order = append(d.order, c)
		d.health.Set("snapshot:"+name, false)
	}
	if len(d.order) == 1 {
		d.single = d.order[0]
	}
	if cfg.DefaultCluster != "" {
		d.single = d.clusters[cfg.DefaultCluster]
	}
	m, err := newMetrics(d.deps.Meter, d)
	if err != nil {
		return nil, err
	}
	d.metrics = m
	d.started = d.now()
	d.lastSweep = d.started
	d.handler = d.routes()
	return d, nil
}

func (d *DataPlane) setDefaults() {
	dd := run.Deps{Logger: d.deps.Logger, Meter: d.deps.Meter, Tracer: d.deps.Tracer,
		Propagator: d.deps.Propagator, Health: d.deps.Health, Now: d.deps.Now}.WithDefaults()
	d.log, d.now, d.prop, d.health, d.deps.Meter = dd.Logger, dd.Now, dd.Propagator, dd.Health, dd.Meter
	d.tracer = dd.Tracer.Tracer(instrumentationLib)
	d.rand = d.deps.Rand
	if d.rand == nil {
		d.rand = rand.Float64
	}
	rt := d.deps.Transport
	if rt == nil {
		rt = newTransport(d.cfg)
	}
	d.transport = rt
	d.client = &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// newTransport is the shared transport to the engines: bounded dial and
// header waits, kept-alive connections, no overall timeout (streams run
// as long as the engine generates).
func newTransport(cfg Config) *http.Transport {
	return &http.Transport{
		Proxy:             http.ProxyFromEnvironment,
		DialContext:       (&net.Dialer{Timeout: cfg.UpstreamDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2: true,
		// One HTTP/1.1 connection per concurrent stream: keep as many idle
		// as an engine can have streams, so a burst does not end in new
		// connections (a 1,000-stream load kept 256 and reconnected the
		// rest on every request). No fleet-wide cap: idle connections
		// exist only where that many streams ran at once.
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   4096,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.UpstreamDialTimeout,
		ResponseHeaderTimeout: cfg.UpstreamHeaderTimeout,
		ExpectContinueTimeout: time.Second,
	}
}

// Handler serves the data plane's HTTP API (README.md): /healthz,
// /v1/routing, /v1/pick, /v1/chat/completions, /v1/completions,
// /v1/embeddings, /v1/models and, when Deps.Metrics is set, /metrics.
func (d *DataPlane) Handler() http.Handler { return d.handler }

// Health returns the readiness the data plane reports on /healthz: one
// component per cluster ("snapshot:NAME", ready once a snapshot is in)
// and one per source.
func (d *DataPlane) Health() *run.Health { return d.health }

// Run runs the owner loop and the configured sources (the KV watcher or
// the file poller, the Kafka status consumer, the probes) until ctx ends
// or one of them fails. It does not serve HTTP: mount Handler.
func (d *DataPlane) Run(ctx context.Context) error {
	var g run.Group
	g.Add("owner", d.runOwner)
	if d.cfg.SnapshotFile != "" {
		g.Add("snapshot file", d.runFile)
	}
	if d.deps.Weights != nil || d.deps.JetStream != nil {
		g.Add("weights watch", d.runKV)
	}
	if d.deps.Kafka != nil {
		g.Add("status consumer", d.runSignals)
	}
	if d.cfg.ProbeInterval > 0 {
		g.Add("probes", d.runProbes)
	}
	if d.deps.NATS != nil && d.cfg.PendingSync > 0 {
		g.Add("pending prefill sync", d.runPendingSync)
	}
	return g.Run(ctx) // errors name their part ("weights watch fe-a: ..."); callers name the data plane
}

// cluster returns the named cluster, or the only one for "".
func (d *DataPlane) cluster(name string) (*cluster, bool) {
	if name == "" {
		return d.single, d.single != nil
	}
	c, ok := d.clusters[name]
	return c, ok
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
