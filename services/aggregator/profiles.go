package aggregator

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
)

// Profile refusal reasons, the values of the
// ilb_aggregator_profiles_refused_total reason label.
var refusalReasons = []struct {
	err    error
	reason string
}{
	{regress.ErrTooFewSamples, "too_few_samples"},
	{regress.ErrNarrowRange, "narrow_range"},
	{regress.ErrNoSaturation, "no_saturation"},
	{regress.ErrPoorFit, "poor_fit"},
	{regress.ErrBadFit, "bad_fit"},
	{regress.ErrInvalidPoint, "invalid_point"},
	{regress.ErrCapacity, "capacity"},
}

func refusalReason(err error) string {
	for _, r := range refusalReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "error"
}

// FitResult is the outcome of the latest fit of one engine (SKU empty) or
// one SKU (Engine empty).
type FitResult struct {
	Engine   string          `json:"engine,omitempty"`
	SKU      string          `json:"sku,omitempty"`
	At       time.Time       `json:"at"`
	Accepted bool            `json:"accepted"`
	Reason   string          `json:"reason,omitempty"` // refusal reason label
	Error    string          `json:"error,omitempty"`  // refusal detail
	Samples  int             `json:"samples"`
	Fit      regress.Profile `json:"-"` // the fit, also when refused (for logs)
}

// profiler fits profiles from the engines' histories and keeps, for each
// engine and SKU, the last accepted profile: a refused refit does not
// withdraw a good profile (its fitted_at tells its age).
type profiler struct {
	cfg      regress.Config
	skus     map[string]string
	replicas map[string]int

	current map[profKey]schemas.Profile
	fits    map[profKey]regress.Profile // the accepted fits, for the SLO capacity
	last    map[profKey]FitResult
	fitter  regress.Fitter // the fits' working memory, kept between them
}

// profKey names a profile: an engine's ({engine, ""}) or a SKU's ({"", sku}).
type profKey struct{ engine, sku string }

// compare orders engine profiles by name, then SKU profiles by SKU.
func (k profKey) compare(o profKey) int {
	if (k.engine == "") != (o.engine == "") {
		if k.engine == "" {
			return 1
		}
		return -1
	}
	if c := strings.Compare(k.engine, o.engine); c != 0 {
		return c
	}
	return strings.Compare(k.sku, o.sku)
}

func newProfiler(cfg Config) *profiler {
	return &profiler{
		cfg: cfg.Regress, skus: cfg.SKUs, replicas: cfg.Replicas,
		current: map[profKey]schemas.Profile{}, fits: map[profKey]regress.Profile{}, last: map[profKey]FitResult{},
	}
}

// fit refits every engine with points, and every SKU shared by at least
// two of them, and returns the attempts in key order and whether any
// profile was accepted.
func (pr *profiler) fit(points map[string][]regress.Point, now time.Time) ([]FitResult, bool) {
	var out []FitResult
	accepted := false
	for _, e := range slices.Sorted(maps.Keys(points)) {
		r := pr.one(profKey{engine: e}, pr.skus[e], points[e], now)
		out = append(out, r)
		accepted = accepted || r.Accepted
	}
	pooled := pr.pooled(points)
	for _, sku := range slices.Sorted(maps.Keys(pooled)) {
		r := pr.one(profKey{sku: sku}, sku, pooled[sku], now)
		out = append(out, r)
		accepted = accepted || r.Accepted
	}
	return out, accepted
}

// pooled returns, per SKU shared by at least two engines with points,
// their points with load per replica, so that engines with more replicas
// do not look like faster hardware.
func (pr *profiler) pooled(points map[string][]regress.Point) map[string][]regress.Point {
	bySKU := map[string][]string{}
	for e := range points {
		if sku := pr.skus[e]; sku != "" {
			bySKU[sku] = append(bySKU[sku], e)
		}
	}
	out := map[string][]regress.Point{}
	for sku, engines := range bySKU {
		if len(engines) < 2 {
			continue
		}
		slices.Sort(engines)
		var pts []regress.Point
		for _, e := range engines {
			n := float64(max(pr.replicas[e], 1))
			for _, p := range points[e] {
				p.LoadRPS /= n
				p.Weight /= n
				pts = append(pts, p)
			}
		}
		out[sku] = pts
	}
	return out
}

func (pr *profiler) one(key profKey, sku string, pts []regress.Point, now time.Time) FitResult {
	engine := key.engine
	r := FitResult{Engine: engine, SKU: sku, At: now, Samples: len(pts)}
	fit, err := pr.fitter.Fit(pts, pr.cfg)
	r.Fit = fit
	row := schemas.Profile{
		Engine: engine, SKU: sku, FittedAtUnixNano: now.UnixNano(),
		CapacityRPS: fit.CapacityRPS, SLOCapacityRPS: fit.SLOCapacityRPS,
		TTFTBaseMs: fit.TTFTBaseMs, TTFTQueueMs: fit.TTFTQueueMs,
		TBOTBaseMs: fit.TBOTBaseMs, TBOTSlopeMs: fit.TBOTSlopeMs, TTFTR2: fit.TTFTR2, TBOTR2: fit.TBOTR2,
		Samples: uint64(fit.Samples), LoadMinRPS: fit.LoadMinRPS, LoadMaxRPS: fit.LoadMaxRPS,
	}
	if err == nil {
		err = row.Validate()
	}
	if err != nil {
		r.Reason, r.Error = refusalReason(err), err.Error()
	} else {
		r.Accepted = true
		pr.current[key], pr.fits[key] = row, fit
	}
	pr.last[key] = r
	return r
}

// table returns the current profiles: engines by name, then SKUs.
func (pr *profiler) table() []schemas.Profile {
	keys := slices.SortedFunc(maps.Keys(pr.current), profKey.compare)
	out := make([]schemas.Profile, len(keys))
	for i, k := range keys {
		out[i] = pr.current[k]
	}
	return out
}
