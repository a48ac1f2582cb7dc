package optimizer

import (
	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
	"github.com/ilb-router/ilb/solver/prior"
)

// Where an engine's profile came from (EngineState.Profile).
const (
	sourceFitted = "fitted" // the aggregator's fit for this engine
	sourceSKU    = "sku"    // the aggregator's fit for the engine's SKU
	sourcePrior  = "prior"  // PriorProfile, from the fleet file
)

// Why an engine's capacity was reduced (EngineState.Derate): the reasons
// of routing.Derate.
const (
	derateUnhealthy = routing.DerateUnhealthy
	derateNoReady   = routing.DerateNoReady
	derateReplicas  = routing.DerateReplicas
	derateErrors    = routing.DerateErrors
	derateSilent    = routing.DerateSilent
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
// fleet order: its profile (fitted, else its SKU's, else the prior) and
// the factor routing.Derate gives from its latest feature row (README.md,
// Derating; the backtester runs the same rules).
func derate(cfg DerateConfig, in *inputs, sh prior.Shape) []engineCap {
	latest := make([]*schemas.Feature, len(in.fleet.Engines))
	for i, fe := range in.fleet.Engines {
		if r, ok := in.engines[fe.Name]; ok {
			latest[i] = &r
		}
	}
	rc := routing.DerateConfig{MaxErrorRate: cfg.MaxErrorRate, ErrorSigmas: cfg.ErrorSigmas,
		MinEngines: cfg.MinEngines, MinRequests: cfg.MinRequests, SilentAfter: cfg.SilentAfter}
	d := routing.Derate(rc, in.fleet, latest, in.newestEnd)
	caps := make([]engineCap, 0, len(in.fleet.Engines))
	for i, fe := range in.fleet.Engines {
		caps = append(caps, engineCap{fleet: fe, profile: in.profileFor(fe, sh), factor: d[i].Factor, reasons: d[i].Reasons})
	}
	return caps
}
