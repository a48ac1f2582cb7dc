package optimizer

import (
	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/prior"
)

// pairKey names a (cluster, class, engine) feature row (class empty in a
// fleet of one class).
type pairKey struct{ cluster, class, engine string }

// inputs is what the optimizer knows of the fleet's recent behaviour: the
// latest feature row of every engine and of every (cluster, engine) pair,
// and the latest fitted profile of every engine and SKU. Only engines and
// clusters of the fleet file are kept, so memory is bounded by the fleet.
// Owned by the solve loop.
type inputs struct {
	fleet    *schemas.Fleet
	engines  map[string]schemas.Feature // engine-level rows
	pairs    map[pairKey]schemas.Feature
	profiles map[string]schemas.Profile // per engine
	skus     map[string]schemas.Profile // SKU-level (engine empty)
	// newestEnd is the latest window end of any row: the fleet's "now" in
	// event time, against which rows are judged current or stale.
	newestEnd int64
	rejected  map[string]uint64 // reason -> rows refused
}

// Reasons a row is refused (label reason of ilb_optimizer_inputs_rejected_total).
const (
	rejectInvalid = "invalid"        // fails schemas validation
	rejectUnknown = "unknown_name"   // engine or cluster not in the fleet file
	rejectDecode  = "decode"         // the record does not decode
	rejectSchema  = "unknown_schema" // the record's schema header is not ours
	rejectFuture  = "future"         // a window ending more than 10 min after the optimizer's clock
)

func newInputs(fleet *schemas.Fleet) *inputs {
	return &inputs{
		fleet:    fleet,
		engines:  map[string]schemas.Feature{},
		pairs:    map[pairKey]schemas.Feature{},
		profiles: map[string]schemas.Profile{},
		skus:     map[string]schemas.Profile{},
		rejected: map[string]uint64{},
	}
}

// addFeatures keeps each row that is newer than the one held for its key
// and reports whether anything changed. A window emitted twice (the
// aggregator re-emits after a restart) has the same end and changes
// nothing.
func (in *inputs) addFeatures(rows []schemas.Feature) bool {
	changed := false
	for i := range rows {
		r := rows[i]
		if err := r.Validate(); err != nil {
			in.rejected[rejectInvalid]++
			continue
		}
		if !in.known(r.Engine, r.Cluster) {
			in.rejected[rejectUnknown]++
			continue
		}
		if in.keep(r) {
			changed = true
			in.newestEnd = max(in.newestEnd, r.WindowEndUnixNano)
		}
	}
	return changed
}

func (in *inputs) known(engine, cluster string) bool {
	if _, ok := in.fleet.Engine(engine); !ok {
		return false
	}
	if cluster == "" {
		return true
	}
	_, ok := in.fleet.Cluster(cluster)
	return ok
}

func (in *inputs) keep(r schemas.Feature) bool {
	if r.Cluster == "" {
		if old, ok := in.engines[r.Engine]; ok && old.WindowEndUnixNano >= r.WindowEndUnixNano {
			return false
		}
		in.engines[r.Engine] = r
		return true
	}
	k := pairKey{r.Cluster, r.Class, r.Engine}
	if old, ok := in.pairs[k]; ok && old.WindowEndUnixNano >= r.WindowEndUnixNano {
		return false
	}
	in.pairs[k] = r
	return true
}

// addProfiles keeps each profile fitted later than the one held for its
// engine (or SKU) and reports whether anything changed.
func (in *inputs) addProfiles(rows []schemas.Profile) bool {
	changed := false
	for i := range rows {
		p := rows[i]
		if err := p.Validate(); err != nil {
			in.rejected[rejectInvalid]++
			continue
		}
		m, key := in.profiles, p.Engine
		if p.Engine == "" {
			m, key = in.skus, p.SKU
		} else if _, ok := in.fleet.Engine(p.Engine); !ok {
			in.rejected[rejectUnknown]++
			continue
		}
		if old, ok := m[key]; ok && old.FittedAtUnixNano >= p.FittedAtUnixNano {
			continue
		}
		m[key] = p
		changed = true
	}
	return changed
}

// current reports whether row r belongs to the latest window: its window
// ends within one window length of the newest end seen (so with hopping
// windows the latest row of each key counts, and with tumbling ones only
// rows of the newest window).
func (in *inputs) current(r schemas.Feature) bool {
	length := r.WindowEndUnixNano - r.WindowStartUnixNano
	return r.WindowEndUnixNano > in.newestEnd-length
}

// profileFor returns the profile the solver uses for engine e and where it
// came from: its own fitted profile, else its SKU's, else the prior. A
// fitted capacity is checked against the prior's (routing.CapFit).
func (in *inputs) profileFor(e schemas.FleetEngine, sh prior.Shape) engineProfile {
	pr := PriorProfileFor(e, sh)
	fitted := func(p schemas.Profile, source string) engineProfile {
		ep := fromProfile(e.Name, p, source)
		ep.engine = routing.CapFit(ep.engine, pr, p.LoadMaxRPS)
		return ep
	}
	if p, ok := in.profiles[e.Name]; ok {
		return fitted(p, sourceFitted)
	}
	if p, ok := in.skus[e.SKU]; ok {
		return fitted(p, sourceSKU)
	}
	return engineProfile{engine: pr, source: sourcePrior}
}
