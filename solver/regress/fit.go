package regress

import (
	"errors"
	"fmt"
	"math"
)

// Point is one window of one engine: the load it served and its latencies.
type Point struct {
	LoadRPS float64 // served load: completions per second in the window
	TTFTMs  float64 // the window's median TTFT (package doc)
	TBOTMs  float64 // the window's median time between output tokens
	// Weight is the point's weight in the least squares; 0 counts as 1.
	// For per-window medians leave it unset: model error, not sampling
	// error, dominates, and weighting by completions lets busy windows
	// swamp light ones (README.md, real data).
	Weight float64
}

// Profile is a fitted latency-versus-load profile in the solver's form
// (DESIGN.md, ilb solve): ttft = TTFTBaseMs + TTFTQueueMs*ρ/(1-ρ) and
// tbot = TBOTBaseMs + TBOTSlopeMs*ρ with ρ = load/CapacityRPS.
type Profile struct {
	TTFTBaseMs  float64
	TTFTQueueMs float64
	TBOTBaseMs  float64
	TBOTSlopeMs float64
	// CapacityRPS is the fitted saturation load, where the queueing term
	// diverges. It is the solver's capacity_rps.
	CapacityRPS float64
	// SLOCapacityRPS is the load at which the fitted TTFT reaches
	// Config.TTFTSLOMs (0 if even an idle engine misses it): the most an
	// optimizer should send; see MaxUtilization.
	SLOCapacityRPS float64
	TTFTR2         float64
	TBOTR2         float64
	Samples        int
	LoadMinRPS     float64
	LoadMaxRPS     float64
}

// TTFTMs predicts the TTFT at a load; +Inf at or beyond capacity.
func (p Profile) TTFTMs(loadRPS float64) float64 {
	if loadRPS >= p.CapacityRPS {
		return math.Inf(1)
	}
	return p.TTFTBaseMs + p.TTFTQueueMs*loadRPS/(p.CapacityRPS-loadRPS)
}

// TBOTMs predicts the time between output tokens at a load.
func (p Profile) TBOTMs(loadRPS float64) float64 {
	return p.TBOTBaseMs + p.TBOTSlopeMs*loadRPS/p.CapacityRPS
}

// MaxUtilization is SLOCapacityRPS / CapacityRPS: the utilisation cap that
// keeps the predicted TTFT within the SLO, for an optimizer that takes the
// SLO as a per-engine limit (max_utilization) rather than a derated
// capacity, which would distort its queueing model.
func (p Profile) MaxUtilization() float64 {
	if p.CapacityRPS <= 0 {
		return 0
	}
	return p.SLOCapacityRPS / p.CapacityRPS
}

// Fit fits a profile to the points: it searches the capacity, and for each
// candidate fits the rest by least squares (package doc). It refuses, with
// an error wrapping one of the sentinels, input too thin or too noisy to
// trust. When the error is ErrNarrowRange, ErrPoorFit or ErrNoSaturation
// the returned Profile holds the rejected fit, for logging only; with
// ErrNoHeadroom (Config.MinHeadroom) only its samples and load range.
func Fit(points []Point, cfg Config) (Profile, error) {
	var f Fitter
	return f.Fit(points, cfg)
}

// Fitter is Fit for a caller that fits again and again (an aggregator's
// profile refresh, the backtester's refits): it keeps the fit's working
// memory (the points' columns, the load groups, the capacity grid)
// between fits, so a fit allocates nothing once it has grown. Its fits
// are Fit's, bit for bit. The zero Fitter is ready; it is not safe for
// concurrent use.
type Fitter struct {
	d data
}

// Fit is Fit(points, cfg) with f's working memory.
func (f *Fitter) Fit(points []Point, cfg Config) (Profile, error) {
	d := &f.d
	if err := d.prepare(points, cfg); err != nil {
		return Profile{}, err
	}
	c, err := d.searchCapacity(cfg.MaxCapacityFactor, cfg.MinHeadroom)
	if errors.Is(err, ErrNoHeadroom) {
		return Profile{Samples: len(d.load), LoadMinRPS: d.minLoad, LoadMaxRPS: d.maxLoad}, err
	}
	p := d.profile(c, cfg)
	if err != nil {
		return p, err
	}
	return p, d.check(p, cfg)
}

// FitCapacity fits the profile with a known capacity (from a prior, a SKU
// profile or a load test): only the base, queue and slope terms are fitted.
func FitCapacity(points []Point, capacityRPS float64, cfg Config) (Profile, error) {
	d, err := prepare(points, cfg)
	if err != nil {
		return Profile{}, err
	}
	if !(capacityRPS > d.maxLoad) || math.IsInf(capacityRPS, 1) {
		return Profile{}, fmt.Errorf("%w: capacity %v rps, loads up to %v rps", ErrCapacity, capacityRPS, d.maxLoad)
	}
	p := d.profile(capacityRPS, cfg)
	if p.TTFTQueueMs == 0 {
		return p, fmt.Errorf("%w: TTFT does not rise with load at capacity %v rps", ErrNoSaturation, capacityRPS)
	}
	return p, d.check(p, cfg)
}

// data is validated input, with scratch space for the fits.
type data struct {
	load, ttft, tbot, w []float64
	x                   []float64 // scratch: the regressor for one capacity
	minLoad, maxLoad    float64
	// The TTFT fit's sums that do not depend on the capacity (Σw, the
	// weighted mean TTFT, its spread about it): fitLine's, computed once
	// in the same order, so every capacity's fit is bit for bit the same.
	ttftSums lineSums
	// groups pool the points by load, when there are few enough loads
	// for that to pay (groupLoads); of is nil otherwise.
	groups groups
	// Working memory kept by a Fitter: the columns above live in buf,
	// the groups' in spare (groupLoads fills it, and it becomes groups
	// when they pay), the capacity search's grid in grid.
	buf   []float64
	spare groups
	grid  []probe
	// The last exact fits' capacities and sse (exact), nRecent of them
	// since prepare.
	recent  [4]exactFit
	nRecent int
}

// The points are grouped by load when there are at most 1/maxGroupShare
// as many loads as points, and at most maxGroupPoints points: the error
// bounds of the estimates (sumError) hold for sums of up to about a
// million terms.
const (
	maxGroupShare  = 4
	maxGroupPoints = 1 << 20
)

// prepare validates the points and returns them as new data.
func prepare(points []Point, cfg Config) (*data, error) {
	d := &data{}
	if err := d.prepare(points, cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// prepare validates the points and sets d up for them, reusing d's
// working memory.
func (d *data) prepare(points []Point, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for i, p := range points {
		if err := p.validate(); err != nil {
			return fmt.Errorf("point %d: %w", i, err)
		}
	}
	if len(points) < cfg.MinSamples {
		return fmt.Errorf("%w: %d points, need %d", ErrTooFewSamples, len(points), cfg.MinSamples)
	}
	n := len(points)
	d.buf = resize(d.buf, 5*n)
	buf := d.buf
	if d.groups.of != nil {
		d.spare = d.groups // the last fit's groups: their memory is free again
	}
	d.load, d.ttft, d.tbot, d.w, d.x = buf[:n], buf[n:2*n], buf[2*n:3*n], buf[3*n:4*n], buf[4*n:]
	d.groups, d.nRecent = groups{}, 0
	d.minLoad, d.maxLoad = math.Inf(1), 0
	for i, p := range points {
		d.load[i], d.ttft[i], d.tbot[i], d.w[i] = p.LoadRPS, p.TTFTMs, p.TBOTMs, p.Weight
		if p.Weight == 0 {
			d.w[i] = 1
		}
		d.minLoad, d.maxLoad = min(d.minLoad, p.LoadRPS), max(d.maxLoad, p.LoadRPS)
	}
	d.ttftSums = ySums(d.ttft, d.w)
	if n <= maxGroupPoints {
		d.spare.groupLoads(d.load, d.ttft, d.w, d.ttftSums.my)
		if len(d.spare.load) <= n/maxGroupShare {
			d.groups, d.spare = d.spare, groups{}
		}
	}
	// The capacity exceeds every load, so a spread below MinLoadSpread of
	// the largest load is too narrow whatever the fit.
	if !(d.maxLoad > d.minLoad) || (d.maxLoad-d.minLoad)/d.maxLoad < cfg.MinLoadSpread {
		return fmt.Errorf("%w: loads %.3g-%.3g rps span less than %.0f%% of the largest",
			ErrNarrowRange, d.minLoad, d.maxLoad, 100*cfg.MinLoadSpread)
	}
	return nil
}

func (p Point) validate() error {
	if rate(p.LoadRPS) && rate(p.TTFTMs) && rate(p.TBOTMs) && rate(p.Weight) {
		return nil // the common case, without building the list below
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"load", p.LoadRPS}, {"TTFT", p.TTFTMs}, {"TBOT", p.TBOTMs}, {"weight", p.Weight}} {
		if !rate(f.v) {
			return fmt.Errorf("%w: %s %v must be finite and non-negative", ErrInvalidPoint, f.name, f.v)
		}
	}
	return nil
}

// rate reports whether v is finite and non-negative.
func rate(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// profile fits every term given the capacity c.
func (d *data) profile(c float64, cfg Config) Profile {
	ttft := d.ttftLine(c)
	for i, l := range d.load {
		d.x[i] = l / c
	}
	tbot := fitLine(d.x, d.tbot, d.w)
	p := Profile{
		TTFTBaseMs: ttft.a, TTFTQueueMs: ttft.b, TBOTBaseMs: tbot.a, TBOTSlopeMs: tbot.b,
		CapacityRPS: c, TTFTR2: ttft.r2(), TBOTR2: tbot.r2(),
		Samples: len(d.load), LoadMinRPS: d.minLoad, LoadMaxRPS: d.maxLoad,
	}
	p.SLOCapacityRPS = sloCapacity(p, cfg.TTFTSLOMs)
	return p
}

// ttftLine fits TTFT against ρ/(1-ρ) = λ/(c-λ) for capacity c: the
// capacity search's inner loop, so the regressor is built in the pass
// that sums it, and the sums of TTFT alone are d.ttftSums.
func (d *data) ttftLine(c float64) line {
	mx := 0.0
	if g := &d.groups; g.of != nil {
		g.regressor(c)
		xs, ws := d.x[:len(g.of)], d.w[:len(g.of)]
		for i, k := range g.of {
			x := g.x[k]
			xs[i] = x
			mx += ws[i] * x
		}
		return fitLineSums(d.x, d.ttft, d.w, mx, d.ttftSums)
	}
	for i, l := range d.load {
		x := l / (c - l)
		d.x[i] = x
		mx += d.w[i] * x
	}
	return fitLineSums(d.x, d.ttft, d.w, mx, d.ttftSums)
}

// sloCapacity solves base + queue*ρ/(1-ρ) = slo for ρ and returns c*ρ.
func sloCapacity(p Profile, slo float64) float64 {
	if slo <= p.TTFTBaseMs || p.TTFTQueueMs <= 0 {
		return 0
	}
	r := (slo - p.TTFTBaseMs) / p.TTFTQueueMs // may be +Inf for a tiny queue term
	return min(p.CapacityRPS*(1/(1+1/r)), p.CapacityRPS)
}

// check applies the refusals that need the fit.
func (d *data) check(p Profile, cfg Config) error {
	for _, v := range []float64{p.TTFTBaseMs, p.TTFTQueueMs, p.TBOTBaseMs, p.TBOTSlopeMs, p.CapacityRPS, p.SLOCapacityRPS} {
		if !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("%w: %+v", ErrBadFit, p)
		}
	}
	if spread := (d.maxLoad - d.minLoad) / p.CapacityRPS; spread < cfg.MinLoadSpread {
		return fmt.Errorf("%w: loads %.3g-%.3g rps cover %.1f%% of capacity %.3g rps, need %.0f%%",
			ErrNarrowRange, d.minLoad, d.maxLoad, 100*spread, p.CapacityRPS, 100*cfg.MinLoadSpread)
	}
	if p.TTFTR2 < cfg.MinTTFTR2 {
		return fmt.Errorf("%w: TTFT R² %.3f below %.3f", ErrPoorFit, p.TTFTR2, cfg.MinTTFTR2)
	}
	return nil
}
