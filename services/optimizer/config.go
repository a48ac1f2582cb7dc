package optimizer

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/streams/kafka"
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

// LeaseKey is the key of the leader lease in the weights bucket. It is
// not a cluster: Config.Validate rejects a fleet with a cluster of that
// name.
const LeaseKey = "manifest.lease"

// Config is everything an Optimizer needs that is not a live dependency.
// Build it with DefaultConfig and change what differs.
type Config struct {
	// ID names this instance: the lease holder and the manifest's leader.
	ID string
	// Fleet gives clusters, engines, network, eligibility and the solver's
	// globals (max utilisation, mean output tokens, shed penalty).
	Fleet *schemas.Fleet

	FeaturesTopic string
	ProfilesTopic string
	// FeatureBacklogRecords is how many records per partition of the
	// features topic are read back at start, so the first solve has the
	// latest windows (profiles are read from the start).
	FeatureBacklogRecords int64

	// Bucket is the weights bucket; BucketReplicas its JetStream
	// replication (3 in production, README.md).
	Bucket         string
	BucketReplicas int
	// LeaseDuration is how long a leader holds the lease without renewing
	// it; 0 turns leader election off (every instance publishes, and the
	// manifest compare-and-swap alone keeps versions consistent).
	LeaseDuration time.Duration

	// Clock says what drives the solves. ClockEvent (the default): one
	// solve per feature window, once that window is complete (every engine
	// of the previous window has reported, a row two windows later
	// arrived, or TickWait of wall time passed), on exactly the rows of
	// that window and the profiles fitted a window before it; so a replay
	// of a recorded signal stream publishes the weights the live run did
	// (README.md, Clock). ClockWall: solve SettleDelay after new input
	// arrives, at most every MinInterval, and re-solve every MaxInterval
	// without input.
	Clock string
	// TickWait is how long (wall time) the event clock waits for the rest
	// of a window's rows once its first row arrived.
	TickWait time.Duration

	// MinInterval is the least time between two solves; triggers in
	// between are coalesced. MaxInterval is the most: a solve (and a
	// publish) happens at least that often, so snapshots stay fresh.
	MinInterval, MaxInterval time.Duration
	// SettleDelay is how long a trigger waits for more input before the
	// solve, so that the rows of one window that arrive in several records
	// are solved together.
	SettleDelay time.Duration
	// MinChange: a solve whose weights (shed counted as one more weight)
	// moved by less total variation than this in every cluster is not
	// published, unless MaxInterval has passed since the last publish.
	MinChange float64

	// ChurnMs is the solver's price of moving traffic (optimize.Options):
	// a route Δ ms better wins at most Δ/(2·ChurnMs) of a cluster per
	// solve. Tolerance and MaxNewtonSteps bound the solve.
	ChurnMs        float64
	Tolerance      float64
	MaxNewtonSteps int

	Demand DemandConfig
	Derate DerateConfig
	// Smooth is how fast a shedding row's published routing follows the
	// solver (routing.SmoothConfig; 0 publishes each solution as solved).
	Smooth routing.SmoothConfig
	// MeanPromptTokens sizes the prior profile of an engine without a
	// fitted one (PriorProfile) until the feature windows give the mean
	// request actually served (ShapeAlpha).
	MeanPromptTokens float64
	// ShapeAlpha is the weight of a solve's new windows in the mean
	// prompt, its cached share and second moment, which size the priors
	// (prior.ShapeEstimate; the backtester's optimizer uses the same,
	// per control interval); ShapeOutputAlpha the same for the mean
	// answer. ShapeAlpha 0.7 since the ninth session (0.2 before): an
	// engine's capacity in requests per second is the mean request's,
	// and the prompts of the next seconds are more like those of the
	// last interval than like the last minute's (Mooncake's long
	// conversations come in runs of heavy prompts), so the caps follow
	// the load the fleet is about to see. ShapeOutputAlpha 0.3 (0.2
	// before): an answer's length is known only at completion and a few
	// long ones swing an interval's mean; at 0.7 the Azure traces' splits
	// moved as often as pid's, at 0.2 the Azure code trace x1.5 lost 5
	// points, at 0.4-0.5 the headroom fleet fell under least-loaded.
	// Sixteen jittered runs of each of the backtester's 24 hour-long
	// scenarios: SLO attainment up on 18, within 1.2 points on the rest
	// (services/backtest README, "The prompts of the last interval").
	ShapeAlpha       float64
	ShapeOutputAlpha float64

	// HistoryLen bounds State().History.
	HistoryLen int
	// PublishTimeout bounds one publish (manifest and cluster keys).
	PublishTimeout time.Duration
}

// DemandConfig says how a cluster's demand is estimated from served
// traffic (README.md, Demand).
type DemandConfig struct {
	// Alpha is the EWMA weight of a new window's observation, in (0, 1].
	Alpha float64
	// MaxShedCorrection caps the shed fraction used to scale observed
	// traffic up to demand (observed / (1 − shed)), so a cluster that shed
	// everything does not get an infinite demand.
	MaxShedCorrection float64
	// MinRPS is the demand below which a cluster counts as idle: it keeps
	// its previous weights.
	MinRPS float64
	// PriorLoad is the share of the fleet's capped capacity assumed as
	// total demand before any traffic is seen, when the fleet file has no
	// total_demand_rps.
	PriorLoad float64
}

// DerateConfig says how capacity is reduced for unhealthy engines and
// outliers (README.md, Derating). It is routing's, whose rules the
// optimizer runs (routing.Derate), so the backtester derates with the
// same settings and the same validation.
type DerateConfig = routing.DerateConfig

// DefaultConfig returns the configuration README.md documents, for fleet.
func DefaultConfig(fleet *schemas.Fleet) Config {
	return Config{
		ID:                    "optimizer",
		Fleet:                 fleet,
		FeaturesTopic:         schemas.TopicFeatures,
		ProfilesTopic:         TopicProfiles,
		FeatureBacklogRecords: 16,
		Bucket:                schemas.BucketWeights,
		BucketReplicas:        1,
		LeaseDuration:         10 * time.Second,
		Clock:                 ClockEvent,
		TickWait:              2 * time.Second,
		MinInterval:           2 * time.Second,
		MaxInterval:           30 * time.Second,
		SettleDelay:           200 * time.Millisecond,
		MinChange:             0.002,
		ChurnMs:               500,
		Tolerance:             1e-6,
		MaxNewtonSteps:        2000,
		Demand:                DemandConfig{Alpha: 0.5, MaxShedCorrection: 0.9, MinRPS: 1e-3, PriorLoad: 0.5},
		Derate:                routing.DefaultDerateConfig(),
		Smooth:                routing.DefaultSmoothConfig(),
		MeanPromptTokens:      1000,
		ShapeAlpha:            0.7,
		ShapeOutputAlpha:      0.3,
		HistoryLen:            512,
		PublishTimeout:        10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("optimizer: config: %w", err)
	}
	return nil
}

func (c Config) validate() error {
	if c.ID == "" || len(c.ID) > schemas.MaxNameLen {
		return fmt.Errorf("id %q: want 1 to %d bytes", c.ID, schemas.MaxNameLen)
	}
	if err := c.validateFleet(); err != nil {
		return err
	}
	if err := c.validateNames(); err != nil {
		return err
	}
	if err := c.validateTiming(); err != nil {
		return err
	}
	if err := c.validateSolver(); err != nil {
		return err
	}
	if err := c.Demand.validate(); err != nil {
		return fmt.Errorf("demand: %w", err)
	}
	if err := c.Derate.Validate(); err != nil {
		return fmt.Errorf("derate: %w", err)
	}
	return c.Smooth.Validate()
}

func (c Config) validateFleet() error {
	if c.Fleet == nil {
		return errors.New("no fleet")
	}
	if err := c.Fleet.Validate(); err != nil {
		return err
	}
	if _, ok := c.Fleet.Cluster(LeaseKey); ok {
		return fmt.Errorf("cluster name %q is reserved for the leader lease", LeaseKey)
	}
	return nil
}

func (c Config) validateNames() error {
	for _, t := range []string{c.FeaturesTopic, c.ProfilesTopic} {
		if err := schemas.ValidTopicName(t); err != nil {
			return err
		}
	}
	if err := schemas.ValidBucketName(c.Bucket); err != nil {
		return err
	}
	switch {
	case c.BucketReplicas < 1 || c.BucketReplicas > 5:
		return fmt.Errorf("bucket replicas %d, want 1 to 5", c.BucketReplicas)
	case c.FeatureBacklogRecords < 0:
		return fmt.Errorf("feature backlog %d records is negative", c.FeatureBacklogRecords)
	}
	return nil
}

func (c Config) validateTiming() error {
	switch {
	case c.MinInterval <= 0 || c.MaxInterval < c.MinInterval:
		return fmt.Errorf("intervals: want 0 < min (%v) <= max (%v)", c.MinInterval, c.MaxInterval)
	case c.SettleDelay < 0 || c.SettleDelay > c.MaxInterval:
		return fmt.Errorf("settle delay %v: want 0 to the max interval", c.SettleDelay)
	case c.LeaseDuration != 0 && c.LeaseDuration < 300*time.Millisecond:
		return fmt.Errorf("lease duration %v: want 0 (off) or at least 300ms", c.LeaseDuration)
	case c.Clock != ClockEvent && c.Clock != ClockWall:
		return fmt.Errorf("clock %q: want %q or %q", c.Clock, ClockEvent, ClockWall)
	case c.TickWait <= 0:
		return fmt.Errorf("tick wait %v must be positive", c.TickWait)
	case c.PublishTimeout <= 0:
		return fmt.Errorf("publish timeout %v must be positive", c.PublishTimeout)
	case c.HistoryLen < 1:
		return fmt.Errorf("history length %d must be positive", c.HistoryLen)
	}
	return nil
}

func (c Config) validateSolver() error {
	switch {
	case !finiteIn(c.ChurnMs, 0, 1e9):
		return fmt.Errorf("churn %v ms: want a finite number >= 0", c.ChurnMs)
	case !(c.Tolerance > 0 && c.Tolerance < 1):
		return fmt.Errorf("tolerance %v: want (0, 1)", c.Tolerance)
	case c.MaxNewtonSteps < 1:
		return fmt.Errorf("max newton steps %d must be positive", c.MaxNewtonSteps)
	case !finiteIn(c.MinChange, 0, 1):
		return fmt.Errorf("min change %v: want [0, 1]", c.MinChange)
	case !(c.MeanPromptTokens > 0) || math.IsInf(c.MeanPromptTokens, 0):
		return fmt.Errorf("mean prompt tokens %v must be positive", c.MeanPromptTokens)
	case !(c.ShapeAlpha > 0 && c.ShapeAlpha <= 1):
		return fmt.Errorf("shape alpha %v: want (0, 1]", c.ShapeAlpha)
	case !(c.ShapeOutputAlpha > 0 && c.ShapeOutputAlpha <= 1):
		return fmt.Errorf("shape output alpha %v: want (0, 1]", c.ShapeOutputAlpha)
	}
	return nil
}

func (d DemandConfig) validate() error {
	switch {
	case !(d.Alpha > 0 && d.Alpha <= 1):
		return fmt.Errorf("alpha %v: want (0, 1]", d.Alpha)
	case !finiteIn(d.MaxShedCorrection, 0, 0.99):
		return fmt.Errorf("max shed correction %v: want [0, 0.99]", d.MaxShedCorrection)
	case !finiteIn(d.MinRPS, 0, 1e9):
		return fmt.Errorf("min rps %v: want >= 0", d.MinRPS)
	case !(d.PriorLoad > 0 && d.PriorLoad <= 1):
		return fmt.Errorf("prior load %v: want (0, 1]", d.PriorLoad)
	}
	return nil
}

func finiteIn(v, lo, hi float64) bool { return v >= lo && v <= hi }

// Deps are the Optimizer's live dependencies. Run needs JetStream and
// Kafka; the rest are optional.
type Deps struct {
	JetStream  jetstream.JetStream
	NATS       *nats.Conn          // optional: after each solve, its connection state is reported on /healthz
	Kafka      *kafka.ClientConfig // features and profiles are consumed from here
	Logger     *slog.Logger        // nil discards logs
	Meter      metric.MeterProvider
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator // nil: otel's global propagator
	Metrics    http.Handler                  // served on GET /metrics when set
	Health     *run.Health                   // readiness is reported here; nil: a private one
	Now        func() time.Time              // nil: time.Now
}
