package backtest

import (
	"fmt"
	"math"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/prior"
	"github.com/ilb-router/ilb/solver/regress"
)

// OptimizerConfig tunes the optimizer policy: what the optimizer service
// and the data plane are configured with.
type OptimizerConfig struct {
	// ChurnMs is the solver's price of moving a cluster's whole traffic
	// (optimize.Options.ChurnMs), anchored on the previous solution.
	ChurnMs float64
	// SpillFactor is the data plane's 1+ε for bounded-load spill of new
	// conversations; +Inf turns it off.
	SpillFactor float64
	// PendingSync is how old the other data planes' pending prefill is
	// when a data plane compares engines by it: its --pending-sync
	// interval (100 ms) plus the delivery between regions, modelled as a
	// view of every cluster's pending prefill taken every PendingSync.
	// 0 shares nothing.
	PendingSync time.Duration
	// DemandAlpha is the weight of the newest window in the demand's
	// moving average (routing.DemandConfig.Alpha); MaxShedCorrection caps
	// the shed fraction served traffic is scaled up by (observed/(1 −
	// shed)).
	DemandAlpha       float64
	MaxShedCorrection float64
	// Smooth is how fast a shedding cluster's published routing follows
	// the solver (routing.SmoothConfig, the optimizer service's
	// --smooth-weights and --smooth-shed).
	Smooth routing.SmoothConfig
	// Derate is how capacity is reduced for unhealthy, silent and
	// error-prone engines (the optimizer service's rules).
	Derate routing.DerateConfig
	// MinChange is the total variation of a cluster's weights (shed
	// counted as one more weight) that some cluster must reach for a new
	// solution to be published, unless MaxInterval has passed since the
	// last publish (the optimizer service's rule).
	MinChange   float64
	MaxInterval time.Duration
	// ShapeAlpha is the weight of the newest control interval in the
	// estimate of the mean prompt (size, cached share, second moment)
	// that sizes the prior profiles, ShapeOutputAlpha in the mean answer
	// (0.7 and 0.3, the optimizer service's defaults: see its
	// ShapeAlpha).
	ShapeAlpha       float64
	ShapeOutputAlpha float64
	// FitWindows is how many recent windows of each engine the profile
	// fits see; FitEvery how many control ticks pass between refits.
	FitWindows int
	FitEvery   int
	// UseFits lets profile fits replace the prior; Regress is what a fit
	// must satisfy to.
	UseFits bool
	Regress regress.Config
	// InitialLoad is the demand assumed before any has been observed, as
	// a share of the fleet's prior capacity × max_utilization (the
	// optimizer service's PriorLoad; a fleet's total_demand_rps overrides
	// it).
	InitialLoad float64
}

// DefaultOptimizerConfig returns the defaults of the optimizer service and
// data plane (README.md).
func DefaultOptimizerConfig() OptimizerConfig {
	return OptimizerConfig{
		ChurnMs: 500, SpillFactor: 1, PendingSync: 250 * time.Millisecond, DemandAlpha: 0.05, MaxShedCorrection: 0.9, Smooth: routing.DefaultSmoothConfig(), Derate: routing.DefaultDerateConfig(),
		MinChange: 0.002, MaxInterval: 30 * time.Second, ShapeAlpha: 0.7, ShapeOutputAlpha: 0.3,
		FitWindows: 120, FitEvery: 6, UseFits: true, Regress: regress.DefaultConfig(), InitialLoad: 0.5,
	}
}

// Validate reports the first problem with c.
func (c OptimizerConfig) Validate() error {
	switch {
	case !(c.ChurnMs >= 0) || math.IsInf(c.ChurnMs, 1):
		return fmt.Errorf("%w: optimizer churn %v ms must be finite and >= 0", ErrConfig, c.ChurnMs)
	case !(c.SpillFactor >= 1):
		return fmt.Errorf("%w: spill factor %v must be >= 1", ErrConfig, c.SpillFactor)
	case c.PendingSync < 0:
		return fmt.Errorf("%w: pending sync %v must not be negative (0 shares nothing)", ErrConfig, c.PendingSync)
	case !(c.DemandAlpha > 0 && c.DemandAlpha <= 1):
		return fmt.Errorf("%w: demand alpha %v must be in (0, 1]", ErrConfig, c.DemandAlpha)
	case !(c.MaxShedCorrection >= 0 && c.MaxShedCorrection < 1):
		return fmt.Errorf("%w: max shed correction %v must be in [0, 1)", ErrConfig, c.MaxShedCorrection)
	case !(c.ShapeAlpha > 0 && c.ShapeAlpha <= 1) || !(c.ShapeOutputAlpha > 0 && c.ShapeOutputAlpha <= 1):
		return fmt.Errorf("%w: shape alphas %v (prompt) and %v (output) must be in (0, 1]", ErrConfig, c.ShapeAlpha, c.ShapeOutputAlpha)
	case !(c.MinChange >= 0 && c.MinChange <= 1) || c.MaxInterval <= 0:
		return fmt.Errorf("%w: min change %v must be in [0, 1] and max interval %v positive", ErrConfig, c.MinChange, c.MaxInterval)
	case c.FitWindows < 1 || c.FitEvery < 1:
		return fmt.Errorf("%w: fit windows %d and fit every %d must be positive", ErrConfig, c.FitWindows, c.FitEvery)
	case !(c.InitialLoad > 0 && c.InitialLoad < 1):
		return fmt.Errorf("%w: initial load %v must be in (0, 1)", ErrConfig, c.InitialLoad)
	}
	if err := c.Smooth.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.Derate.Validate(); err != nil {
		return fmt.Errorf("%w: derate: %w", ErrConfig, err)
	}
	if err := c.Regress.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// optimizerPolicy is ilb: the simulated signals go through the
// aggregator's windows (streams/window) into per-engine feature history,
// profile fits (solver/regress) replace the engine-model prior
// (solver/prior) once they pass, demand is estimated and capacity derated
// by the optimizer service's rules (services/internal/routing), the
// solver (solver/optimize) runs with the last published solution as
// anchor, each cluster's table is updated with minimal churn
// (routing.Table), and requests are picked with the data plane's
// guardrails (tablePicker).
type optimizerPolicy struct {
	*tablePicker
	cfg         OptimizerConfig
	view        signalView
	prev        *optimize.Solution // anchor: what is published
	published   map[string]map[string]float64
	pubShed     map[string]float64
	ticks       int
	demand      *routing.Demand
	prior       []float64 // by cluster: demand before the first observation
	shape       shapeEstimate
	hist        [][]regress.Point // by engine, the last FitWindows windows
	fitted      []*regress.Profile
	fitPoints   []regress.Point    // refit's pooled history, reused
	fitter      regress.Fitter     // refit's working memory
	last        []*schemas.Feature // by engine: the latest row (into rows), nil before one
	rows        []schemas.Feature  // by engine: copies of the latest rows, reused
	newestEnd   int64
	solves      int
	solveErrors int
	publishedNs int64 // when the current solution was published
	calib       calibrator
	solver      optimize.Solver // keeps the model between solves
	builder     routing.Builder // keeps the problem's routes between solves
	release     routing.Release // when smoothing stops (routing.Smooth)
}

// calibration is the model's calibration over the run (recorder.finish).
func (p *optimizerPolicy) calibration(r *recorder, endNs int64) []EngineCalibration {
	return p.calib.calibrate(r, endNs)
}

func newOptimizerPolicy(s *sim) (*optimizerPolicy, error) {
	if err := s.enableSignals(); err != nil {
		return nil, err
	}
	dem, err := routing.NewDemand(s.fi.f, routing.DemandConfig{Alpha: s.cfg.Optimizer.DemandAlpha, MaxShedCorrection: s.cfg.Optimizer.MaxShedCorrection})
	if err != nil {
		return nil, fmt.Errorf("backtest: optimizer: %w", err)
	}
	ne := len(s.fi.engines)
	p := &optimizerPolicy{
		tablePicker: newTablePicker(s, s.cfg.Optimizer.SpillFactor),
		cfg:         s.cfg.Optimizer,
		demand:      dem,
		hist:        make([][]regress.Point, ne),
		fitted:      make([]*regress.Profile, ne),
		last:        make([]*schemas.Feature, ne),
		rows:        make([]schemas.Feature, ne),
		shape:       shapeEstimate{prior.ShapeEstimate{Alpha: s.cfg.Optimizer.ShapeAlpha, OutputAlpha: s.cfg.Optimizer.ShapeOutputAlpha, Fallback: nominalShape(s.fi)}},
		calib:       calibrator{ne: ne},
	}
	s.observer = &p.shape
	p.syncLag = p.cfg.PendingSync
	caps := make([]float64, ne)
	for e, pr := range s.fi.params {
		caps[e] = prior.Profile(s.fi.engines[e], pr, p.shape.Get()).CapacityRps
	}
	p.prior = routing.PriorDemand(s.fi.f, s.fi.rows, caps, p.cfg.InitialLoad)
	if err := p.solve(s); err != nil {
		return nil, err
	}
	return p, nil
}

// control runs the weight path once: new windows in, a solve, new tables.
func (p *optimizerPolicy) control(s *sim) {
	p.ticks++
	wins := p.view.drain(s)
	if len(wins) == 0 {
		return // nothing new: production would not re-solve either
	}
	for _, w := range wins {
		p.observe(s, w)
	}
	p.shape.Roll()
	if p.ticks%p.cfg.FitEvery == 0 {
		p.refit(s)
	}
	p.rollShares()
	if err := p.solve(s); err != nil {
		// A failed solve publishes nothing: the data plane keeps the
		// previous tables, as in production.
		p.solveErrors++
	}
}

// observe takes one window: latest engine state, fit history, demand
// (routing.Demand, with the shed fractions in force).
func (p *optimizerPolicy) observe(s *sim, w windowRows) {
	p.newestEnd = max(p.newestEnd, w.endNs)
	for e, r := range w.engines {
		if r == nil {
			continue
		}
		p.rows[e] = *r // a copy: r points into the view's scratch
		p.last[e] = &p.rows[e]
		if r.Requests > r.Errors && r.Errors == 0 {
			h := append(p.hist[e], regress.Point{LoadRPS: r.ArrivalRPS, TTFTMs: r.TTFTP50Ms, TBOTMs: r.TBOTP50Ms, Weight: float64(r.Requests)})
			if len(h) > p.cfg.FitWindows {
				h = h[len(h)-p.cfg.FitWindows:]
			}
			p.hist[e] = h
		}
	}
	p.demand.Observe(w.endNs, w.rows, p.shed)
}

// minHeadroom is how far above the largest load seen a fitted capacity
// must lie to count as identified.
const minHeadroom = 1.05

// identified rejects fits regress accepts but that are not a physical
// engine: no queue term, no base TTFT (a prefill takes time), or a
// capacity pinned at the largest load seen (the fit then explains the
// windows by one point's ρ/(1−ρ)). With such a profile the solver would
// see an engine that never queues, and pile traffic onto it.
func identified(p regress.Profile) bool {
	return p.TTFTQueueMs > 0 && p.TTFTBaseMs > 0 && p.CapacityRPS >= minHeadroom*p.LoadMaxRPS
}

// fitConfig is the fits' regress.Config: the configured one, refusing
// early (regress.ErrNoHeadroom) the fits identified would reject for their
// capacity, which are most of them when the windows show no queueing.
func (p *optimizerPolicy) fitConfig() regress.Config {
	cfg := p.cfg.Regress
	if cfg.MaxCapacityFactor >= minHeadroom { // else no fit has the headroom
		cfg.MinHeadroom = max(cfg.MinHeadroom, minHeadroom)
	}
	return cfg
}

// refit fits each SKU's pooled history (the windows of every engine of
// the SKU, loads per replica), as the aggregator pools engines that share
// a SKU; a fit that passes regress's checks replaces the prior for those
// engines (capacity scaled by their replicas), one that does not leaves
// the last good one.
func (p *optimizerPolicy) refit(s *sim) {
	done := map[string]bool{}
	if !p.cfg.UseFits {
		return
	}
	for _, sku := range s.fi.sku {
		if done[sku] {
			continue
		}
		done[sku] = true
		pts := p.fitPoints[:0]
		for e, h := range p.hist {
			if s.fi.sku[e] != sku {
				continue
			}
			r := float64(max(s.fi.params[e].Replicas, 1))
			for _, pt := range h {
				pt.LoadRPS /= r
				pts = append(pts, pt)
			}
		}
		p.fitPoints = pts
		if len(pts) < p.cfg.Regress.MinSamples {
			continue
		}
		prof, err := p.fitter.Fit(pts, p.fitConfig())
		if err != nil || !identified(prof) {
			continue
		}
		for e := range p.hist {
			if s.fi.sku[e] == sku {
				pe := prof
				pe.CapacityRPS *= float64(max(s.fi.params[e].Replicas, 1))
				p.fitted[e] = &pe
			}
		}
	}
}
