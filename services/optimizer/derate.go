package optimizer

import (
	"math"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
)

// Where an engine's profile came from (EngineState.Profile).
const (
	sourceFitted = "fitted" // the aggregator's fit for this engine
	sourceSKU    = "sku"    // the aggregator's fit for the engine's SKU
	sourcePrior  = "prior"  // PriorProfile, from the fleet file
)

// Why an engine's capacity was reduced (EngineState.Derate).
const (
	derateUnhealthy = "unhealthy"         // last status in the window was not healthy
	derateNoReady   = "no_ready_replicas" // ready replicas 0
	derateReplicas  = "replicas"          // fewer ready replicas than the fleet file's
	derateErrors    = "errors"            // error-rate outlier
	derateSilent    = "silent"            // seen before, nothing recent
)

// engineProfile is an engine's latency profile and its origin.
type engineProfile struct {
	engine optimize.Engine
	source string
}

func fromProfile(name string, p schemas.Profile, source string) engineProfile {
	return engineProfile{source: source, engine: optimize.Engine{
		Name:        name,
		CapacityRps: p.CapacityRPS,
		TTFT:        optimize.TTFT{BaseMs: p.TTFTBaseMs, QueueMs: p.TTFTQueueMs},
		TBOT:        optimize.TBOT{BaseMs: p.TBOTBaseMs, SlopeMs: p.TBOTSlopeMs},
	}}
}

// engineCap is one engine as the solve sees it: its profile, and the
// factor its capacity is multiplied by, with the reasons.
type engineCap struct {
	fleet   schemas.FleetEngine
	profile engineProfile
	factor  float64  // in [0, 1]; 0 excludes the engine
	reasons []string // why factor < 1, in the order applied
}

// capacity is the derated capacity the solver gets.
func (c engineCap) capacity() float64 { return c.profile.engine.CapacityRps * c.factor }

// derate computes every fleet engine's capacity for the next solve, in
// fleet order. The rules (README.md, Derating), from the engine's latest
// feature row:
//
//   - no row yet: full capacity (cold start; the data plane's guardrails
//     react to a dead engine faster than windows can);
//   - latest row older than SilentAfter behind the fleet's newest window:
//     0 (the engine stopped reporting);
//   - a row with status events whose last health was not healthy, or with
//     no ready replica: 0;
//   - fewer ready replicas than the fleet file's replicas: × ready/replicas;
//   - an error-rate outlier (errorOutliers): × (1 − error rate).
//
// A row without status events says nothing about health, so only the
// error rule applies to it.
func derate(cfg DerateConfig, in *inputs, meanPrompt float64) []engineCap {
	outliers := errorOutliers(cfg, in)
	caps := make([]engineCap, 0, len(in.fleet.Engines))
	for _, fe := range in.fleet.Engines {
		c := engineCap{fleet: fe, profile: in.profileFor(fe, meanPrompt), factor: 1}
		if r, ok := in.engines[fe.Name]; ok {
			c.applyStatus(cfg, in, r)
			if rate, bad := outliers[fe.Name]; bad && c.factor > 0 {
				c.scale(1-rate, derateErrors)
			}
		}
		caps = append(caps, c)
	}
	return caps
}

func (c *engineCap) scale(f float64, reason string) {
	c.factor *= max(0, min(1, f))
	c.reasons = append(c.reasons, reason)
}

func (c *engineCap) applyStatus(cfg DerateConfig, in *inputs, r schemas.Feature) {
	if time.Duration(in.newestEnd-r.WindowEndUnixNano) > cfg.SilentAfter {
		c.scale(0, derateSilent)
		return
	}
	if r.StatusEvents == 0 {
		return
	}
	total := max(c.fleet.Replicas, 1)
	switch {
	case !r.Healthy:
		c.scale(0, derateUnhealthy)
	case r.ReadyReplicas == 0:
		c.scale(0, derateNoReady)
	case int(r.ReadyReplicas) < total:
		c.scale(float64(r.ReadyReplicas)/float64(total), derateReplicas)
	}
}

// errorFloor is the least spread assumed among the other engines' error
// rates, so that one engine among error-free peers is an outlier only from
// ErrorSigmas percentage points up, not at its first failure.
const errorFloor = 0.01

// errorOutliers returns the engines whose latest error rate marks them as
// outliers, with that rate: above MaxErrorRate, or above the mean of the
// other judged engines by ErrorSigmas of their standard deviation (at
// least errorFloor). Leaving the engine itself out matters: with n
// engines one value can never exceed the mean of all by more than
// (n−1)/√n standard deviations, so a 3σ rule over all engines could not
// fire below 11 engines. Judged engines are those with at least
// MinRequests requests in a current window.
func errorOutliers(cfg DerateConfig, in *inputs) map[string]float64 {
	var names []string
	var rates []float64
	for _, fe := range in.fleet.Engines { // fleet order: deterministic sums
		r, ok := in.engines[fe.Name]
		if ok && r.Requests >= cfg.MinRequests && in.current(r) {
			names = append(names, fe.Name)
			rates = append(rates, r.ErrorRate)
		}
	}
	out := map[string]float64{}
	for i, rate := range rates {
		if rate > cfg.MaxErrorRate {
			out[names[i]] = rate
			continue
		}
		if len(rates) < cfg.MinEngines {
			continue
		}
		mean, sd := meanSDWithout(rates, i)
		if rate > mean+cfg.ErrorSigmas*max(sd, errorFloor) {
			out[names[i]] = rate
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
