package aggregator

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/solver/regress"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/window"
)

// TopicProfiles is the default Kafka topic of fitted profiles: each record
// is key "profiles", value an Arrow IPC stream of one schemas.ProfileSchema
// batch holding every profile the publishing aggregator currently stands by.
const TopicProfiles = schemas.TopicProfiles

// Clocks of Config.Clock.
const (
	ClockEvent = "event"
	ClockWall  = "wall"
)

// Config is everything an Aggregator needs that is not a live dependency.
// Build it with DefaultConfig and change what differs.
type Config struct {
	Kafka kafka.ClientConfig
	// Group is the consumer group: instances sharing it split the
	// partitions of SignalsTopic between them.
	Group string
	// Topics read (SignalsTopic) and written.
	SignalsTopic, DLQTopic, FeaturesTopic, ProfilesTopic string
	// CreateTopics creates missing topics at start with the brokers'
	// default partitions and replication.
	CreateTopics bool

	// Window is the window length; Hop the distance between window starts
	// (0 or Window: tumbling windows).
	Window, Hop time.Duration
	// OutOfOrder is how far the watermark trails the newest event time
	// of a partition; AllowedLateness how long a window stays open after
	// the watermark passes its end. Events later than both are counted as
	// late, not applied.
	OutOfOrder, AllowedLateness time.Duration
	// IdleTimeout: a partition that has received nothing for this long
	// (wall time) has its watermark advanced by the wall clock, so that
	// windows of engines that went silent still close.
	IdleTimeout time.Duration
	// MaxEnginesPerWindow bounds the engines one partition's window
	// holds; MaxClustersPerEngine the cluster rows of one engine.
	MaxEnginesPerWindow, MaxClustersPerEngine int
	// MaxBatchPerReplica maps an engine to its fleet max_batch, for the
	// utilisation feature (ConfigFromFleet fills it).
	MaxBatchPerReplica map[string]int
	// Classify labels a completion with its request class (model and
	// prompt band; routing.Rows.Label), so that pair rows are per
	// (cluster, class, engine). nil (a fleet of one class): per (cluster,
	// engine), without a class. ConfigFromFleet fills it.
	Classify func(engine, model string, promptTokens uint32) string

	// MaxPollRecords bounds one handled batch; PollInterval bounds how
	// long a poll waits before idle partitions, commits and publishing
	// retries are looked at.
	MaxPollRecords int
	PollInterval   time.Duration
	// CommitInterval is the most often offsets are committed while no
	// window is emitted (an emission commits at once).
	CommitInterval time.Duration
	// PublishTimeout bounds one attempt to publish pending records.
	PublishTimeout time.Duration
	// MaxPendingRecords: while more output records than this wait for
	// Kafka, fetching signals is paused.
	MaxPendingRecords int
	// SessionTimeout and HeartbeatInterval are the consumer group's.
	SessionTimeout, HeartbeatInterval time.Duration
	// MaxCheckpointBytes bounds the commit metadata that carries a
	// partition's window checkpoint (Kafka's offset.metadata.max.bytes
	// defaults to 4096).
	MaxCheckpointBytes int

	// OutDir, when set, receives Arrow IPC files of the emitted features
	// and published profiles (README.md, Files). FileRollInterval starts a
	// new file after this long.
	OutDir           string
	FileRollInterval time.Duration

	// Clock says what times the refits. ClockEvent (the default): a fit
	// every ProfileInterval of event time, at each multiple of it that
	// every owned partition's emitted windows have passed, on the windows
	// ending at or before it, stamped with it (fitted_at and the
	// ilb-as-of header); so a replay of a recorded signal stream fits the
	// profiles the live run did. ClockWall: every ProfileInterval of wall
	// time, on what has arrived.
	Clock string

	// ProfileInterval is how often profiles are refitted; HistoryWindows
	// how many windows of each engine the fits see; MaxEngines bounds the
	// engines (and SKUs) with a history.
	ProfileInterval time.Duration
	HistoryWindows  int
	MaxEngines      int
	Regress         regress.Config
	// SKUs maps an engine to its SKU and Replicas to its replica count
	// (fleet file): engines of one SKU are also fitted together, per
	// replica (README.md, Profiles).
	SKUs     map[string]string
	Replicas map[string]int
}

// DefaultConfig returns the defaults documented in README.md: 10-second
// tumbling windows emitted 3 s of event time after they end, profiles
// refitted every 30 s over the last hour.
func DefaultConfig() Config {
	wc := window.DefaultConfig()
	return Config{
		Kafka:                kafka.DefaultClientConfig(),
		Group:                "ilb-aggregator",
		SignalsTopic:         schemas.TopicSignals,
		DLQTopic:             schemas.TopicSignalsDLQ,
		FeaturesTopic:        schemas.TopicFeatures,
		ProfilesTopic:        TopicProfiles,
		CreateTopics:         true,
		Window:               wc.Size,
		Hop:                  0, // tumbling, whatever Window becomes
		OutOfOrder:           wc.OutOfOrder,
		AllowedLateness:      wc.AllowedLateness,
		IdleTimeout:          10 * time.Second,
		MaxEnginesPerWindow:  4096,
		MaxClustersPerEngine: 256,
		MaxPollRecords:       4096,
		PollInterval:         250 * time.Millisecond,
		CommitInterval:       time.Second,
		PublishTimeout:       10 * time.Second,
		MaxPendingRecords:    10_000,
		SessionTimeout:       10 * time.Second,
		HeartbeatInterval:    time.Second,
		MaxCheckpointBytes:   4000,
		FileRollInterval:     24 * time.Hour,
		Clock:                ClockEvent,
		ProfileInterval:      30 * time.Second,
		HistoryWindows:       360,
		MaxEngines:           4096,
		Regress:              regress.DefaultConfig(),
	}
}

// ConfigFromFleet sets what the fleet file knows: max batch sizes, SKUs,
// replica counts, the TTFT SLO and, for a fleet of more than one request
// class, the class of each completion (Classify).
func (c *Config) ConfigFromFleet(f *schemas.Fleet) {
	if rows := routing.NewRows(f); !rows.Single {
		c.Classify = rows.Label
	} else {
		c.Classify = nil
	}
	c.MaxBatchPerReplica = map[string]int{}
	c.SKUs = map[string]string{}
	c.Replicas = map[string]int{}
	for _, e := range f.Engines {
		if e.MaxBatch > 0 {
			c.MaxBatchPerReplica[e.Name] = e.MaxBatch
		}
		if e.SKU != "" {
			c.SKUs[e.Name] = e.SKU
		}
		c.Replicas[e.Name] = max(e.Replicas, 1)
	}
	if f.TTFTSLOMs > 0 {
		c.Regress.TTFTSLOMs = f.TTFTSLOMs
	}
}

// windowConfig returns the per-partition window configuration.
func (c Config) windowConfig() window.FeaturesConfig {
	fc := window.DefaultFeaturesConfig()
	fc.Window.Size, fc.Window.Hop = c.Window, c.Hop
	if c.Hop == 0 {
		fc.Window.Hop = c.Window
	}
	fc.Window.OutOfOrder, fc.Window.AllowedLateness = c.OutOfOrder, c.AllowedLateness
	fc.Window.MaxKeysPerWindow = c.MaxEnginesPerWindow
	fc.Window.MaxPartitions = 1 << 16
	fc.MaxClustersPerEngine = c.MaxClustersPerEngine
	fc.MaxBatchPerReplica = c.MaxBatchPerReplica
	fc.Classify = c.Classify
	return fc
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("aggregator: config: %w", err)
	}
	return nil
}

func (c Config) validate() error {
	if err := c.Kafka.Validate(); err != nil {
		return err
	}
	if c.Group == "" {
		return errors.New("empty consumer group")
	}
	for _, t := range []string{c.SignalsTopic, c.DLQTopic, c.FeaturesTopic, c.ProfilesTopic} {
		if err := schemas.ValidTopicName(t); err != nil {
			return err
		}
	}
	if err := c.windowConfig().Validate(); err != nil {
		return err
	}
	if err := c.Regress.Validate(); err != nil {
		return err
	}
	return c.validateLimits()
}

func (c Config) validateLimits() error {
	switch {
	case c.Clock != ClockEvent && c.Clock != ClockWall:
		return fmt.Errorf("clock %q: want %q or %q", c.Clock, ClockEvent, ClockWall)
	case c.IdleTimeout <= 0 || c.PollInterval <= 0 || c.CommitInterval <= 0 || c.PublishTimeout <= 0:
		return fmt.Errorf("idle timeout %v, poll interval %v, commit interval %v and publish timeout %v must be positive",
			c.IdleTimeout, c.PollInterval, c.CommitInterval, c.PublishTimeout)
	case c.HeartbeatInterval <= 0 || c.SessionTimeout <= c.HeartbeatInterval:
		return fmt.Errorf("heartbeat interval %v must be positive and below the session timeout %v", c.HeartbeatInterval, c.SessionTimeout)
	case c.MaxPollRecords < 1 || c.MaxPendingRecords < 1 || c.MaxCheckpointBytes < 64:
		return fmt.Errorf("max poll records %d and max pending records %d must be at least 1, max checkpoint bytes %d at least 64",
			c.MaxPollRecords, c.MaxPendingRecords, c.MaxCheckpointBytes)
	case c.ProfileInterval <= 0 || c.FileRollInterval <= 0:
		return fmt.Errorf("profile interval %v and file roll interval %v must be positive", c.ProfileInterval, c.FileRollInterval)
	case c.HistoryWindows < c.Regress.MinSamples || c.HistoryWindows > 1<<20:
		return fmt.Errorf("history of %d windows: need %d..%d (at least the fit's min samples)", c.HistoryWindows, c.Regress.MinSamples, 1<<20)
	case c.MaxEngines < 1:
		return fmt.Errorf("max engines %d must be positive", c.MaxEngines)
	}
	for e, n := range c.Replicas {
		if n < 1 {
			return fmt.Errorf("engine %q: %d replicas", e, n)
		}
	}
	return nil
}

// Deps are the live dependencies of an Aggregator. Every field is
// optional.
type Deps struct {
	Logger     *slog.Logger                  // nil discards logs
	Tracer     trace.TracerProvider          // nil: no spans
	Meter      metric.MeterProvider          // nil: no metrics
	Propagator propagation.TextMapPropagator // nil: otel's global propagator
	Metrics    http.Handler                  // served on GET /metrics when set
	Health     *run.Health                   // readiness is reported here; nil: a private one
	Now        func() time.Time              // wall clock; nil: time.Now
}
