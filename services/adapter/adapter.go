package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/streams/kafka"
)

// Target is one engine to scrape.
type Target struct {
	Engine string // engine name, as in the fleet file
	URL    string // its Prometheus endpoint, e.g. http://10.0.0.7:8000/metrics
	Kind   Kind
}

// Config is everything an Adapter needs that is not a live dependency.
type Config struct {
	Targets []Target
	// Interval is the scrape period; ScrapeTimeout bounds one scrape.
	Interval      time.Duration
	ScrapeTimeout time.Duration
	// MaxBodyBytes bounds a /metrics body.
	MaxBodyBytes int64
	// MaxCompletionsPerScrape bounds the completion events synthesized
	// from one interval; the rest are counted, not sent.
	MaxCompletionsPerScrape int
	// MaxGapIntervals bounds the interval, in scrape intervals, whose
	// counters' growth is turned into completions: after a longer gap
	// (failed scrapes) the growth is a baseline, not a burst.
	MaxGapIntervals int

	// Kafka is where events go; no brokers means only OnEvent sees them.
	Kafka    kafka.ClientConfig
	Producer kafka.ProducerConfig
	Topic    string
	// OnEvent, when set, gets every event, from the targets' goroutines
	// concurrently; it must not block.
	OnEvent func(ev schemas.Event, synthetic bool)

	// HTTPClient scrapes; nil uses a client with ScrapeTimeout.
	HTTPClient     *http.Client
	Logger         *slog.Logger
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
}

// DefaultConfig returns a configuration publishing to the local embedded
// broker every 5 s.
func DefaultConfig() Config {
	pc := kafka.DefaultProducerConfig()
	pc.AllowAutoTopicCreation = true
	return Config{
		Interval:                5 * time.Second,
		ScrapeTimeout:           3 * time.Second,
		MaxBodyBytes:            32 << 20,
		MaxCompletionsPerScrape: 10_000,
		MaxGapIntervals:         6,
		Kafka:                   kafka.DefaultClientConfig(),
		Producer:                pc,
		Topic:                   schemas.TopicSignals,
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case len(c.Targets) == 0:
		return errors.New("adapter: no targets")
	case c.Interval <= 0 || c.ScrapeTimeout <= 0:
		return fmt.Errorf("adapter: interval %v and scrape timeout %v must be positive", c.Interval, c.ScrapeTimeout)
	case c.MaxBodyBytes < 1 || c.MaxCompletionsPerScrape < 0:
		return fmt.Errorf("adapter: max body %d bytes must be positive, max completions %d not negative",
			c.MaxBodyBytes, c.MaxCompletionsPerScrape)
	case c.MaxGapIntervals < 2:
		return fmt.Errorf("adapter: max gap %d intervals must be at least 2 (one failed scrape)", c.MaxGapIntervals)
	}
	if err := c.validateTargets(); err != nil {
		return err
	}
	if err := schemas.ValidTopicName(c.Topic); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	if len(c.Kafka.Brokers) > 0 {
		if err := c.Kafka.Validate(); err != nil {
			return fmt.Errorf("adapter: %w", err)
		}
		return c.Producer.Validate()
	}
	return nil
}

func (c Config) validateTargets() error {
	seen := map[string]bool{}
	for i, t := range c.Targets {
		probe := schemas.EngineStatus{Engine: t.Engine, TimeUnixNano: 1}
		if err := probe.Validate(); err != nil {
			return fmt.Errorf("adapter: target %d: %w", i, err)
		}
		if seen[t.Engine] {
			return fmt.Errorf("adapter: engine %q targeted twice", t.Engine)
		}
		seen[t.Engine] = true
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("adapter: engine %s: metrics URL %q must be http(s)://host/...", t.Engine, t.URL)
		}
		if _, err := ParseKind(string(t.Kind)); err != nil {
			return fmt.Errorf("adapter: engine %s: %w", t.Engine, err)
		}
	}
	return nil
}

// Adapter scrapes real engines and publishes their signals.
type Adapter struct {
	cfg     Config
	log     *slog.Logger
	client  *http.Client
	prod    *kafka.Producer
	tracer  trace.Tracer
	metrics *metrics
	ran     sync.Once

	// mu orders SetTargets with Run starting and stopping the scrapers.
	mu       sync.Mutex
	targets  []Target // in force; Run starts them
	running  map[string]*running
	runCtx   context.Context // set by Run under mu; nil before
	closed   bool
	scrapers sync.WaitGroup
}

// running is one target's scraper loop.
type running struct {
	t      Target
	cancel context.CancelFunc
}

// New validates cfg and connects (lazily) to Kafka.
func New(cfg Config) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := run.Deps{Logger: cfg.Logger, Meter: cfg.MeterProvider, Tracer: cfg.TracerProvider}.WithDefaults()
	a := &Adapter{cfg: cfg, log: d.Logger, client: cfg.HTTPClient, tracer: d.Tracer.Tracer(scopeName),
		targets: slices.Clone(cfg.Targets), running: map[string]*running{}}
	if a.client == nil {
		a.client = &http.Client{Timeout: cfg.ScrapeTimeout}
	}
	var err error
	if a.metrics, err = newMetrics(d.Meter); err != nil {
		return nil, err
	}
	if len(cfg.Kafka.Brokers) > 0 {
		pc := cfg.Producer
		pc.Propagator = cfg.Propagator
		if a.prod, err = kafka.NewProducer(cfg.Kafka, pc); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Run scrapes every target each Interval until ctx ends, then flushes
// the events still buffered (bounded by the producer's close timeout).
func (a *Adapter) Run(ctx context.Context) error {
	first := false
	a.ran.Do(func() { first = true })
	if !first {
		return errors.New("adapter: Run called twice")
	}
	a.mu.Lock()
	a.runCtx = ctx
	for _, t := range a.targets {
		a.start(t)
	}
	a.mu.Unlock()
	<-ctx.Done()
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.scrapers.Wait()
	if a.prod != nil {
		_ = a.prod.Close()
	}
	return nil
}

// start runs t's scraper until ctx ends or SetTargets stops it. Called
// with a.mu held, by Run or after it started.
func (a *Adapter) start(t Target) {
	ctx, cancel := context.WithCancel(a.runCtx)
	a.running[t.Engine] = &running{t: t, cancel: cancel}
	s := &scraper{a: a, t: t, attrs: newTargetSets(t)}
	a.scrapers.Go(func() {
		defer cancel()
		s.run(ctx)
	})
}

// SetTargets replaces the targets while the adapter runs (a fleet file
// reload): an engine added is scraped from now on; an engine removed is
// no longer scraped (no more status events for it); an engine whose URL
// or kind changed is scraped afresh, its counters' first sample a new
// baseline (a new URL is usually a new server). Targets that fail
// Config's checks, or none at all, are refused and nothing changes.
func (a *Adapter) SetTargets(targets []Target) error {
	next := a.cfg
	next.Targets = targets
	if len(targets) == 0 {
		return errors.New("adapter: no targets")
	}
	if err := next.validateTargets(); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.targets = slices.Clone(targets)
	if a.runCtx == nil || a.closed {
		return nil
	}
	keep := map[string]bool{}
	for _, t := range targets {
		keep[t.Engine] = true
		r := a.running[t.Engine]
		switch {
		case r == nil:
			a.log.Info("adapter: target added", "engine", t.Engine, "url", t.URL)
		case r.t != t:
			r.cancel()
			a.log.Info("adapter: target changed", "engine", t.Engine, "url", t.URL, "kind", t.Kind)
		default:
			continue
		}
		a.start(t)
	}
	for name, r := range a.running {
		if !keep[name] {
			r.cancel()
			delete(a.running, name)
			a.log.Info("adapter: target removed", "engine", name)
		}
	}
	return nil
}

// Targets returns the targets in force.
func (a *Adapter) Targets() []Target {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.targets)
}

// scrape fetches and parses one target's metrics.
func (a *Adapter) scrape(ctx context.Context, t Target) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return Sample{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := a.client.Do(req)
	if err != nil {
		return Sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return Sample{}, fmt.Errorf("GET %s: %s", t.URL, resp.Status)
	}
	body := io.LimitReader(resp.Body, a.cfg.MaxBodyBytes)
	s, err := Parse(body, t.Kind)
	if err != nil {
		return Sample{}, fmt.Errorf("GET %s: %w", t.URL, err)
	}
	return s, nil
}

// Header flagging events synthesized from metrics rather than reported
// per request: its value is "metrics".
const HeaderSynthetic = "ilb-synthetic"

var (
	schemaHeader    = kafkaHeader(schemas.HeaderSchema, schemas.SchemaSignalV1)
	syntheticHeader = kafkaHeader(HeaderSynthetic, "metrics")
)

// publish sends one event to Kafka (never blocking: with the producer's
// buffer full it is dropped and counted) and to OnEvent.
func (a *Adapter) publish(ctx context.Context, ev *schemas.Event, synthetic bool) {
	if a.cfg.OnEvent != nil {
		a.cfg.OnEvent(*ev, synthetic)
	}
	if a.prod == nil {
		return
	}
	value, err := schemas.AppendEvent(make([]byte, 0, schemas.EncodedSize(ev)), ev)
	if err != nil {
		a.log.Error("adapter: invalid event", "err", err)
		return
	}
	key := []byte(ev.Status.Engine)
	if ev.Kind == schemas.KindCompletion {
		key = []byte(ev.Completion.Engine)
		if synthetic {
			a.prod.TryProduce(ctx, a.cfg.Topic, key, value, schemaHeader, syntheticHeader)
			return
		}
	}
	a.prod.TryProduce(ctx, a.cfg.Topic, key, value, schemaHeader)
}

// Stats returns the Kafka producer's counters (zero without Kafka).
func (a *Adapter) Stats() kafka.ProducerStats {
	if a.prod == nil {
		return kafka.ProducerStats{}
	}
	return a.prod.Stats()
}

func targetAttr(t Target) attribute.KeyValue { return attribute.String("engine", t.Engine) }
