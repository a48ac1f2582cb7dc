package regress

import (
	"errors"
	"fmt"
	"math"
)

// Config sets what Fit accepts as enough evidence.
type Config struct {
	// MinSamples is the fewest points (windows) Fit uses.
	MinSamples int
	// MinLoadSpread is the least (max load - min load) / CapacityRPS the
	// points must cover: a curve seen over a sliver of its range says
	// little about the rest.
	MinLoadSpread float64
	// TTFTSLOMs is the TTFT at which an engine counts as full; it sets
	// SLOCapacityRPS.
	TTFTSLOMs float64
	// MaxCapacityFactor bounds the capacity search to MaxCapacityFactor x
	// the largest load seen. A best fit at that bound means the data show
	// no saturation: Fit then returns ErrNoSaturation rather than an
	// extrapolation.
	MaxCapacityFactor float64
	// MinTTFTR2 is the least TTFT R² Fit accepts.
	MinTTFTR2 float64
	// MinHeadroom, when above 1, has Fit refuse (ErrNoHeadroom) a fit
	// whose capacity the capacity grid alone shows to lie below
	// MinHeadroom × the largest load, without refining it: for a caller
	// that discards such fits (the backtester's optimizer policy: a
	// capacity pinned at the largest load explains the windows by one
	// point's ρ/(1−ρ)). Refining them was most of the cost of the fits
	// of windows that show no queueing. 0, the default, refines every fit.
	MinHeadroom float64
}

// DefaultConfig returns the defaults: 8 windows, a load spread of 20% of
// capacity, a 1 s TTFT SLO, capacity at most 20x the largest load, and a
// TTFT R² of at least 0.5 (the curve explains at least half the variance of
// per-window medians).
func DefaultConfig() Config {
	return Config{MinSamples: 8, MinLoadSpread: 0.2, TTFTSLOMs: 1000, MaxCapacityFactor: 20, MinTTFTR2: 0.5}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.MinSamples < 3:
		return fmt.Errorf("%w: min samples %d, need at least 3 for 3 parameters", ErrConfig, c.MinSamples)
	case !(c.MinLoadSpread >= 0 && c.MinLoadSpread < 1):
		return fmt.Errorf("%w: min load spread %v outside [0, 1)", ErrConfig, c.MinLoadSpread)
	case !(c.TTFTSLOMs > 0) || math.IsInf(c.TTFTSLOMs, 1):
		return fmt.Errorf("%w: TTFT SLO %v ms must be positive and finite", ErrConfig, c.TTFTSLOMs)
	case !(c.MaxCapacityFactor > 1) || c.MaxCapacityFactor > 1e6:
		return fmt.Errorf("%w: max capacity factor %v outside (1, 1e6]", ErrConfig, c.MaxCapacityFactor)
	case !(c.MinTTFTR2 >= 0 && c.MinTTFTR2 <= 1):
		return fmt.Errorf("%w: min TTFT R² %v outside [0, 1]", ErrConfig, c.MinTTFTR2)
	case !(c.MinHeadroom == 0 || c.MinHeadroom > 1 && c.MinHeadroom <= c.MaxCapacityFactor):
		return fmt.Errorf("%w: min headroom %v is neither 0 nor in (1, max capacity factor %v]", ErrConfig, c.MinHeadroom, c.MaxCapacityFactor)
	}
	return nil
}

// Errors. Fit wraps them with the figures that failed; callers branch with
// errors.Is and keep their previous profile.
var (
	ErrConfig        = errors.New("regress: invalid config")
	ErrInvalidPoint  = errors.New("regress: invalid point")
	ErrTooFewSamples = errors.New("regress: too few samples")
	ErrNarrowRange   = errors.New("regress: load range too narrow")
	ErrNoSaturation  = errors.New("regress: no saturation in the data: capacity not identifiable")
	ErrPoorFit       = errors.New("regress: poor fit")
	ErrBadFit        = errors.New("regress: fitted parameters not finite and non-negative")
	ErrCapacity      = errors.New("regress: capacity must exceed every observed load")
	ErrNoHeadroom    = errors.New("regress: capacity below the minimum headroom over the largest load")
)
