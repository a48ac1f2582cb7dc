package backtest

import (
	"fmt"
	"math"
)

// PIDConfig tunes the legacy controller (README.md gives the grid search
// behind the defaults).
type PIDConfig struct {
	// Kp, Ki and Kd are the gains on an engine's relative error
	// (fleet mean score − its score) / fleet mean score, its running sum
	// and its change since the last tick.
	Kp, Ki, Kd float64
	// Alpha is the weight of the newest window in each engine's smoothed
	// score (an EWMA); the score is the window's TTFT p90.
	Alpha float64
	// Locality is the base weight of an engine in another region than the
	// cluster, relative to one in the same region (1: no preference).
	Locality float64
	// MinMultiplier and MaxMultiplier bound an engine's multiplier of its
	// base weight; IntegralLimit bounds the running sum of errors.
	MinMultiplier, MaxMultiplier float64
	IntegralLimit                float64
}

// DefaultPIDConfig returns the gains found best by the grid search in
// README.md (on a different stretch of the trace than the acceptance
// test, and another seed).
func DefaultPIDConfig() PIDConfig {
	return PIDConfig{Kp: 0.1, Ki: 0.02, Kd: 0, Alpha: 0.5, Locality: 1,
		MinMultiplier: 0.05, MaxMultiplier: 4, IntegralLimit: 10}
}

// Validate reports the first problem with c.
func (c PIDConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"Kp", c.Kp}, {"Ki", c.Ki}, {"Kd", c.Kd}, {"integral limit", c.IntegralLimit}} {
		if !(f.v >= 0) || math.IsInf(f.v, 1) {
			return fmt.Errorf("%w: pid %s %v must be finite and >= 0", ErrConfig, f.name, f.v)
		}
	}
	switch {
	case !(c.Alpha > 0 && c.Alpha <= 1):
		return fmt.Errorf("%w: pid alpha %v must be in (0, 1]", ErrConfig, c.Alpha)
	case !(c.Locality > 0 && c.Locality <= 1):
		return fmt.Errorf("%w: pid locality %v must be in (0, 1]", ErrConfig, c.Locality)
	case !(c.MinMultiplier > 0 && c.MinMultiplier <= 1 && c.MaxMultiplier >= 1) || math.IsInf(c.MaxMultiplier, 1):
		return fmt.Errorf("%w: pid multipliers [%v, %v] must satisfy 0 < min <= 1 <= max < inf", ErrConfig, c.MinMultiplier, c.MaxMultiplier)
	}
	return nil
}

// pidPolicy is the legacy controller DESIGN.md describes: every control
// tick it smooths each engine's TTFT p90 from the same feature windows the
// optimizer reads into a score, compares it with the fleet average, and
// sets the engine's multiplier of its base weight (capacity, times
// Locality outside the cluster's region) by PID control on the relative
// error: better-than-average engines gain weight, the rest lose it.
// Requests go by weighted consistent hashing: the same sched tables as the
// optimizer, updated with minimal churn, unhealthy engines skipped, no
// bounded-load spill and no shedding.
type pidPolicy struct {
	*tablePicker
	cfg               PIDConfig
	view              signalView
	base              [][]float64 // [c][e]
	score             []float64   // by engine; NaN before its first window
	integ, last, mult []float64
}

func newPID(s *sim) (*pidPolicy, error) {
	if err := s.enableSignals(); err != nil {
		return nil, err
	}
	ne := len(s.fi.engines)
	p := &pidPolicy{
		tablePicker: newTablePicker(s, math.Inf(1)),
		cfg:         s.cfg.PID,
		score:       make([]float64, ne), integ: make([]float64, ne), last: make([]float64, ne), mult: make([]float64, ne),
	}
	caps := nominalCapacities(s.fi)
	for c := range s.fi.nrows() {
		b := make([]float64, ne)
		for _, e := range s.fi.elig[c] {
			b[e] = caps[e]
			if s.fi.remote[c][e] {
				b[e] *= p.cfg.Locality
			}
		}
		p.base = append(p.base, b)
	}
	for e := range p.score {
		p.score[e], p.mult[e] = math.NaN(), 1
	}
	return p, p.apply(s)
}

func (p *pidPolicy) control(s *sim) {
	wins := p.view.drain(s)
	if len(wins) == 0 {
		return
	}
	a := p.cfg.Alpha
	for _, w := range wins {
		for e, r := range w.engines {
			if r == nil || r.Requests == r.Errors {
				continue // no latency seen: the score keeps its value
			}
			if math.IsNaN(p.score[e]) {
				p.score[e] = r.TTFTP90Ms
			} else {
				p.score[e] = a*r.TTFTP90Ms + (1-a)*p.score[e]
			}
		}
	}
	p.update(s)
	_ = p.apply(s) // cannot fail: weights are positive and finite
}

// update moves each engine's multiplier by PID on its relative error.
func (p *pidPolicy) update(s *sim) {
	sum, n := 0.0, 0
	for e, v := range p.score {
		if !math.IsNaN(v) && s.healthy[e] {
			sum += v
			n++
		}
	}
	if n == 0 || sum <= 0 {
		return
	}
	avg := sum / float64(n)
	lim := p.cfg.IntegralLimit
	for e, v := range p.score {
		if math.IsNaN(v) {
			continue
		}
		err := (avg - v) / avg
		p.integ[e] = min(max(p.integ[e]+err, -lim), lim)
		d := err - p.last[e]
		p.last[e] = err
		m := 1 + p.cfg.Kp*err + p.cfg.Ki*p.integ[e] + p.cfg.Kd*d
		p.mult[e] = min(max(m, p.cfg.MinMultiplier), p.cfg.MaxMultiplier)
	}
}

// apply sets every cluster's weights: base × multiplier over healthy
// eligible engines, normalised.
func (p *pidPolicy) apply(s *sim) error {
	for c := range s.fi.nrows() {
		w := make([]float64, len(s.fi.engines))
		total := 0.0
		for _, e := range s.fi.elig[c] {
			if s.healthy[e] {
				w[e] = p.base[c][e] * p.mult[e]
				total += w[e]
			}
		}
		if total == 0 {
			for _, e := range s.fi.elig[c] {
				w[e] = p.base[c][e] // all down: keep the table, picks fail over
				total += w[e]
			}
		}
		for e := range w {
			w[e] /= total
		}
		if err := p.set(c, w, 0); err != nil {
			return err
		}
	}
	return nil
}
