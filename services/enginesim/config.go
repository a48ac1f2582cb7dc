package enginesim

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/fleetmodel"
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/streams/kafka"
)

// Config is everything a Sim needs that is not a live dependency.
type Config struct {
	// Fleet gives the engines and their parameters. A zero engine number
	// (prefill_tokens_per_s, decode_step_ms, max_batch, kv_cache_tokens,
	// replicas, block_tokens) is taken from engine.DefaultParams of the
	// engine's SKU.
	Fleet *schemas.Fleet
	// Engines, when non-empty, is the subset of the fleet's engines to
	// simulate.
	Engines []string
	// HTTPAddr is where New listens ("127.0.0.1:0" picks a port); empty
	// serves nothing, for callers that mount Handler themselves.
	HTTPAddr string
	// MetricsHandler, when set, is served at GET /metrics of HTTPAddr.
	MetricsHandler http.Handler

	// Kafka is the cluster signals go to; no brokers means no Kafka (only
	// OnEvent sees the events).
	Kafka    kafka.ClientConfig
	Producer kafka.ProducerConfig
	// Topic receives the signal events, keyed by engine name.
	Topic string
	// OnEvent, when set, is called with every signal event, from the
	// engines' goroutines, concurrently; it must not block.
	OnEvent func(schemas.Event)

	// StatusInterval is the wall-clock period of each engine's status
	// event.
	StatusInterval time.Duration
	// TimeScale runs the engines that many times faster than real time
	// (1 = real time). Every time the simulator reports (TTFT, TBOT) is
	// wall-clock time, so a scaled engine looks like a faster GPU.
	TimeScale float64
	// Seed seeds the injected errors.
	Seed uint64

	// DefaultOutputTokens is the output length of a request without
	// max_tokens; MaxOutputTokens caps max_tokens.
	DefaultOutputTokens int
	MaxOutputTokens     int
	// MaxBodyBytes bounds a request body (413 beyond).
	MaxBodyBytes int64
	// MaxWaiting bounds each engine's queue: a request arriving when that
	// many wait gets 503.
	MaxWaiting int
	// ChunkInterval paces streamed chunks (wall clock): each carries the
	// tokens produced since the previous one.
	ChunkInterval time.Duration
	// DrainTimeout is how long an engine removed from the fleet
	// (SetFleet) keeps serving; then it stops once idle (fleet.go).
	DrainTimeout time.Duration

	Logger         *slog.Logger
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// Propagator reads trace context from requests and writes it into
	// completion events' record headers; nil uses the global one.
	Propagator propagation.TextMapPropagator
}

// DefaultConfig returns a configuration for the built-in example fleet,
// listening on 127.0.0.1:8000, publishing to the local embedded broker.
func DefaultConfig() Config {
	pc := kafka.DefaultProducerConfig()
	pc.AllowAutoTopicCreation = true
	return Config{
		Fleet:               schemas.ExampleFleet(),
		HTTPAddr:            "127.0.0.1:8000",
		Kafka:               kafka.DefaultClientConfig(),
		Producer:            pc,
		Topic:               schemas.TopicSignals,
		StatusInterval:      time.Second,
		TimeScale:           1,
		Seed:                1,
		DefaultOutputTokens: 128,
		MaxOutputTokens:     4096,
		MaxBodyBytes:        8 << 20,
		MaxWaiting:          10_000,
		ChunkInterval:       100 * time.Millisecond,
		DrainTimeout:        2 * time.Minute,
	}
}

// maxTimeScale bounds TimeScale: the engine model's clock is int64
// nanoseconds (durations capped at 2^62), which at the largest scale lasts
// 2^62 ns / 1000, 53 days of wall time.
const maxTimeScale = 1000

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Fleet == nil || len(c.Fleet.Engines) == 0:
		return errors.New("enginesim: no fleet engines")
	case !(c.TimeScale > 0 && c.TimeScale <= maxTimeScale):
		return fmt.Errorf("enginesim: time scale %v must be in (0, %v]", c.TimeScale, float64(maxTimeScale))
	case c.StatusInterval <= 0 || c.ChunkInterval <= 0:
		return fmt.Errorf("enginesim: status interval %v and chunk interval %v must be positive", c.StatusInterval, c.ChunkInterval)
	case c.DefaultOutputTokens < 1 || c.MaxOutputTokens < c.DefaultOutputTokens || c.MaxOutputTokens > 1<<20:
		return fmt.Errorf("enginesim: output tokens default %d, max %d: want 1 <= default <= max <= 2^20",
			c.DefaultOutputTokens, c.MaxOutputTokens)
	case c.MaxBodyBytes < 1 || c.MaxWaiting < 1:
		return fmt.Errorf("enginesim: max body %d bytes and max waiting %d must be positive", c.MaxBodyBytes, c.MaxWaiting)
	case c.DrainTimeout < 0:
		return fmt.Errorf("enginesim: drain timeout %v must not be negative", c.DrainTimeout)
	}
	if err := schemas.ValidTopicName(c.Topic); err != nil {
		return fmt.Errorf("enginesim: %w", err)
	}
	if len(c.Kafka.Brokers) > 0 {
		if err := c.Kafka.Validate(); err != nil {
			return fmt.Errorf("enginesim: %w", err)
		}
		if err := c.Producer.Validate(); err != nil {
			return fmt.Errorf("enginesim: %w", err)
		}
	}
	_, err := c.engineSpecs()
	return err
}

// errNoSubsetEngine rejects a fleet that keeps none of Config.Engines.
var errNoSubsetEngine = errors.New("enginesim: the fleet lists none of the engines to simulate (--engines)")

// engineSpec is one simulated engine's identity and model parameters.
type engineSpec struct {
	fleet  schemas.FleetEngine
	params engine.Params
}

// engineSpecs resolves the engines to simulate, in fleet order.
func (c Config) engineSpecs() ([]engineSpec, error) {
	for _, name := range c.Engines {
		if !slices.ContainsFunc(c.Fleet.Engines, func(e schemas.FleetEngine) bool { return e.Name == name }) {
			return nil, fmt.Errorf("enginesim: engine %q is not in the fleet", name)
		}
	}
	var specs []engineSpec
	seen := map[string]bool{}
	for _, fe := range c.Fleet.Engines {
		if len(c.Engines) > 0 && !slices.Contains(c.Engines, fe.Name) {
			continue
		}
		if err := checkEngineName(fe.Name); err != nil {
			return nil, err
		}
		if seen[fe.Name] {
			return nil, fmt.Errorf("enginesim: engine %q listed twice", fe.Name)
		}
		seen[fe.Name] = true
		p, err := Params(c.Fleet, fe)
		if err != nil {
			return nil, err
		}
		specs = append(specs, engineSpec{fleet: fe, params: p})
	}
	return specs, nil
}

// checkEngineName accepts names that are one URL path segment.
func checkEngineName(name string) error {
	if name == "" || len(name) > schemas.MaxNameLen || strings.ContainsAny(name, "/?#%") ||
		strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fmt.Errorf("enginesim: engine name %q must be 1-%d bytes without '/', '?', '#', '%%', spaces or control characters",
			name, schemas.MaxNameLen)
	}
	return nil
}

// Params returns the engine model parameters of fleet engine fe
// (fleetmodel.Params): the fleet's numbers, with zero ones taken from
// engine.DefaultParams of fe's SKU, and KV admission on.
func Params(f *schemas.Fleet, fe schemas.FleetEngine) (engine.Params, error) {
	p, err := fleetmodel.Params(f, fe)
	if err != nil {
		return engine.Params{}, fmt.Errorf("enginesim: %w", err)
	}
	return p, nil
}

// virtualClock maps wall time to the engines' virtual nanoseconds.
type virtualClock struct {
	start time.Time
	scale float64
}

// at is the virtual time of wall time t.
func (c virtualClock) at(t time.Time) int64 { return int64(float64(t.Sub(c.start)) * c.scale) }

// wall is the first wall time whose virtual time is at least v.
func (c virtualClock) wall(v int64) time.Time {
	return c.start.Add(time.Duration(math.Ceil(float64(v)/c.scale)) + 1)
}

// wallMs converts a virtual duration in milliseconds to wall milliseconds.
func (c virtualClock) wallMs(ms float64) float64 { return ms / c.scale }
