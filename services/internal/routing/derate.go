package routing

import (
	"fmt"
	"math"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// Why an engine's capacity was reduced (Derating.Reasons).
const (
	DerateUnhealthy = "unhealthy"         // last status in the window was not healthy
	DerateNoReady   = "no_ready_replicas" // ready replicas 0
	DerateReplicas  = "replicas"          // fewer ready replicas than the fleet file's
	DerateErrors    = "errors"            // error-rate outlier
	DerateSilent    = "silent"            // seen before, nothing recent
)

// DerateConfig says how capacity is reduced for unhealthy engines and
// outliers.
type DerateConfig struct {
	// MaxErrorRate: an engine with a higher error rate is an outlier.
	MaxErrorRate float64
	// ErrorSigmas: an engine whose error rate exceeds the mean of the
	// other judged engines by this many of their standard deviations is an
	// outlier too (with at least MinEngines engines judged).
	ErrorSigmas float64
	MinEngines  int
	// MinRequests is the fewest requests in a window for an error rate to
	// be judged.
	MinRequests uint64
	// SilentAfter: an engine seen before whose latest window ends this long
	// before the newest window of the fleet is treated as down.
	SilentAfter time.Duration
}

// DefaultDerateConfig is the optimizer service's default.
func DefaultDerateConfig() DerateConfig {
	return DerateConfig{MaxErrorRate: 0.2, ErrorSigmas: 3, MinEngines: 3, MinRequests: 10, SilentAfter: time.Minute}
}

// Validate reports the first problem with c.
func (c DerateConfig) Validate() error {
	switch {
	case !(c.MaxErrorRate > 0 && c.MaxErrorRate <= 1):
		return fmt.Errorf("max error rate %v must be in (0, 1]", c.MaxErrorRate)
	case !(c.ErrorSigmas > 0) || math.IsInf(c.ErrorSigmas, 1):
		return fmt.Errorf("error sigmas %v must be positive", c.ErrorSigmas)
	case c.MinEngines < 2:
		return fmt.Errorf("min engines %d must be at least 2", c.MinEngines)
	case c.SilentAfter <= 0:
		return fmt.Errorf("silent after %v must be positive", c.SilentAfter)
	}
	return nil
}

// Derating is the factor an engine's capacity is multiplied by, in [0, 1]
// (0 excludes the engine), and why it is below 1, in the order applied.
type Derating struct {
	Factor  float64
	Reasons []string
}

func (d *Derating) scale(f float64, reason string) {
	d.Factor *= max(0, min(1, f))
	d.Reasons = append(d.Reasons, reason)
}

// Current reports whether row r belongs to the latest window of a fleet
// whose newest window ends at newestEnd: its window ends within one window
// length of it (so with hopping windows the latest row of each key counts,
// and with tumbling ones only rows of the newest window).
func Current(r *schemas.Feature, newestEnd int64) bool {
	return r.WindowEndUnixNano > newestEnd-(r.WindowEndUnixNano-r.WindowStartUnixNano)
}

// Derate computes every fleet engine's capacity factor for the next solve,
// by fleet engine index, from latest[e], the engine's latest feature row
// (nil: none yet), with newestEnd the newest window end of the fleet:
//
//   - no row yet: full capacity (cold start; the data plane's guardrails
//     react to a dead engine faster than windows can);
//   - latest row older than SilentAfter behind newestEnd: 0 (the engine
//     stopped reporting);
//   - a row with status events whose last health was not healthy, or with
//     no ready replica: 0;
//   - fewer ready replicas than the fleet file's replicas: × ready/replicas;
//   - an error-rate outlier (see errorOutliers): × (1 − error rate).
//
// A row without status events says nothing about health, so only the
// error rule applies to it.
func Derate(cfg DerateConfig, f *schemas.Fleet, latest []*schemas.Feature, newestEnd int64) []Derating {
	outliers := errorOutliers(cfg, latest, newestEnd)
	out := make([]Derating, len(f.Engines))
	for e, fe := range f.Engines {
		out[e].Factor = 1
		if e >= len(latest) || latest[e] == nil {
			continue
		}
		applyStatus(cfg, &out[e], fe, latest[e], newestEnd)
		if rate, bad := outliers[e]; bad && out[e].Factor > 0 {
			out[e].scale(1-rate, DerateErrors)
		}
	}
	return out
}

func applyStatus(cfg DerateConfig, d *Derating, fe schemas.FleetEngine, r *schemas.Feature, newestEnd int64) {
	if time.Duration(newestEnd-r.WindowEndUnixNano) > cfg.SilentAfter {
		d.scale(0, DerateSilent)
		return
	}
	if r.StatusEvents == 0 {
		return
	}
	total := max(fe.Replicas, 1)
	switch {
	case !r.Healthy:
		d.scale(0, DerateUnhealthy)
	case r.ReadyReplicas == 0:
		d.scale(0, DerateNoReady)
	case int(r.ReadyReplicas) < total:
		d.scale(float64(r.ReadyReplicas)/float64(total), DerateReplicas)
	}
}

// errorFloor is the least spread assumed among the other engines' error
// rates, so that one engine among error-free peers is an outlier only from
// ErrorSigmas percentage points up, not at its first failure.
const errorFloor = 0.01

// errorOutliers returns the engines (fleet index) whose latest error rate
// marks them as outliers, with that rate: above MaxErrorRate, or above the
// mean of the other judged engines by ErrorSigmas of their standard
// deviation (at least errorFloor). Leaving the engine itself out matters:
// with n engines one value can never exceed the mean of all by more than
// (n−1)/√n standard deviations, so a 3σ rule over all engines could not
// fire below 11 engines. Judged engines are those with at least
// MinRequests requests in a current window.
func errorOutliers(cfg DerateConfig, latest []*schemas.Feature, newestEnd int64) map[int]float64 {
	var idx []int
	var rates []float64
	for e, r := range latest { // fleet order: deterministic sums
		if r != nil && r.Requests >= cfg.MinRequests && Current(r, newestEnd) {
			idx = append(idx, e)
			rates = append(rates, r.ErrorRate)
		}
	}
	out := map[int]float64{}
	for i, rate := range rates {
		if rate > cfg.MaxErrorRate {
			out[idx[i]] = rate
			continue
		}
		if len(rates) < cfg.MinEngines {
			continue
		}
		mean, sd := meanSDWithout(rates, i)
		if rate > mean+cfg.ErrorSigmas*max(sd, errorFloor) {
			out[idx[i]] = rate
		}
	}
	return out
}

// meanSDWithout is the mean and population standard deviation of xs
// without xs[skip].
func meanSDWithout(xs []float64, skip int) (mean, sd float64) {
	n := 0.0
	for i, x := range xs {
		if i != skip {
			mean += x
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	mean /= n
	for i, x := range xs {
		if i != skip {
			sd += (x - mean) * (x - mean)
		}
	}
	return mean, math.Sqrt(sd / n)
}
