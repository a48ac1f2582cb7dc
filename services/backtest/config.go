package backtest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest/peer"
)

// Config is a backtest run. Build it with DefaultConfig and set Fleet.
type Config struct {
	Fleet    *schemas.Fleet
	Policies []string // default: every policy
	Seed     uint64
	// Speed divides every gap between arrivals (2 replays twice as fast).
	Speed float64
	// Spread spreads requests that share a timestamp over the step to the
	// next one (SpreadAuto: when the trace's timestamps are coarse).
	Spread Spread
	// Jitter moves each arrival later by a random share (from Seed) of
	// up to Jitter, never past the next arrival (jitterArrivals): runs
	// with different seeds then show how much results move by chance.
	// 0 replays the timestamps as they are.
	Jitter time.Duration
	// Duration keeps the requests arriving before it (simulated time,
	// after Speed); 0 keeps all.
	Duration time.Duration
	Swings   []Swing
	Failures []Failure
	// AffinityKey is what requests are routed by: AffinityConversation
	// (the default, "" too) or AffinityPrompt, the data plane's key for
	// clients that send no conversation id (AssignPromptKeys).
	AffinityKey string

	// StatusInterval is how often engines report status (health, running,
	// waiting, KV use), as the engine simulator does; routers learn health
	// from it.
	StatusInterval time.Duration
	// ControlInterval is the controllers' cadence (pid, optimizer).
	ControlInterval time.Duration
	// Window and WindowHop shape the aggregator's feature windows.
	Window, WindowHop time.Duration
	// SeriesInterval is the step of the report's time series.
	SeriesInterval time.Duration

	Optimizer OptimizerConfig
	PID       PIDConfig
	// PeerPolicies are peer router policies beyond package peer's
	// shipped ones (configured variants, say peer.LLMD with other
	// weights), or replacing a shipped one of the same name. Policies
	// names them like any other.
	PeerPolicies []peer.Policy

	// Parallel is how many policies are simulated at once.
	Parallel int
	// Progress, when set, receives a progress line per policy every
	// ProgressInterval of wall time.
	Progress         io.Writer
	ProgressInterval time.Duration
	// Clock is the wall clock, for progress and timing only (never for
	// results). Nil means time.Now.
	Clock func() time.Time
}

// DefaultConfig returns the production cadence: status every second,
// controllers every 5 s over 10 s windows hopping by 5 s.
func DefaultConfig() Config {
	return Config{
		Policies:         append([]string(nil), Policies...),
		Seed:             1,
		Speed:            1,
		Spread:           SpreadAuto,
		StatusInterval:   time.Second,
		ControlInterval:  5 * time.Second,
		Window:           10 * time.Second,
		WindowHop:        5 * time.Second,
		SeriesInterval:   10 * time.Second,
		Optimizer:        DefaultOptimizerConfig(),
		PID:              DefaultPIDConfig(),
		Parallel:         1,
		ProgressInterval: 2 * time.Second,
	}
}

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("backtest: invalid config")

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	switch {
	case c.Fleet == nil:
		return fmt.Errorf("%w: no fleet", ErrConfig)
	case len(c.Policies) == 0:
		return fmt.Errorf("%w: no policy", ErrConfig)
	case !(c.Speed > 0) || math.IsInf(c.Speed, 1) || c.Speed > 1e6:
		return fmt.Errorf("%w: speed %v must be in (0, 1e6]", ErrConfig, c.Speed)
	case c.Duration < 0 || c.Duration > maxDuration:
		return fmt.Errorf("%w: duration %v must be in [0, %v]", ErrConfig, c.Duration, maxDuration)
	case c.Spread != SpreadAuto && c.Spread != SpreadOn && c.Spread != SpreadOff:
		return fmt.Errorf("%w: spread %q must be auto, on or off", ErrConfig, c.Spread)
	case c.Jitter < 0 || c.Jitter > time.Minute:
		return fmt.Errorf("%w: jitter %v must be in [0, 1m]", ErrConfig, c.Jitter)
	case c.Parallel < 1:
		return fmt.Errorf("%w: parallel %d must be at least 1", ErrConfig, c.Parallel)
	case c.AffinityKey != "" && c.AffinityKey != AffinityConversation && c.AffinityKey != AffinityPrompt:
		return fmt.Errorf("%w: affinity key %q: want %s or %s", ErrConfig, c.AffinityKey, AffinityConversation, AffinityPrompt)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"status interval", c.StatusInterval}, {"control interval", c.ControlInterval}, {"window", c.Window},
		{"window hop", c.WindowHop}, {"series interval", c.SeriesInterval}} {
		if d.v < time.Millisecond || d.v > time.Hour {
			return fmt.Errorf("%w: %s %v must be in [1ms, 1h]", ErrConfig, d.name, d.v)
		}
	}
	if c.Window%c.WindowHop != 0 {
		return fmt.Errorf("%w: window %v is not a multiple of its hop %v", ErrConfig, c.Window, c.WindowHop)
	}
	for _, p := range c.PeerPolicies {
		if p.Name == "" || strings.ContainsAny(p.Name, ", ") || strings.HasSuffix(p.Name, peer.LocalSuffix) || p.New == nil {
			return fmt.Errorf("%w: peer policy %q needs a name without commas, spaces or %s, and a New", ErrConfig, p.Name, peer.LocalSuffix)
		}
	}
	if _, err := parsePolicies(strings.Join(c.Policies, ","), c.PeerPolicies); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.Optimizer.Validate(); err != nil {
		return err
	}
	return c.PID.Validate()
}
