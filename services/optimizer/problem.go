package optimizer

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/optimize"
)

// errNoEngine: every engine is derated to zero. Publishing "shed
// everything" on the strength of the signals alone would turn a reporting
// outage into a full outage, so nothing is published and the data planes
// keep their last snapshot and their own guardrails.
var errNoEngine = errors.New("optimizer: no engine has capacity (all unhealthy, silent or without ready replicas)")

// minCapacityRPS is the capacity below which a derated engine is left out
// of the problem rather than offered to the solver as a sliver.
const minCapacityRPS = 1e-6

// buildProblem turns the fleet, the engines' derated capacities and the
// demand estimates into the solver's problem. Engines are sorted by name,
// clusters kept in fleet order; an engine with no capacity is left out,
// and a cluster may use only engines that are in the problem, eligible
// (residency) and reachable (a network_ms pair between their regions).
func buildProblem(f *schemas.Fleet, caps []engineCap, demand map[string]float64) (*optimize.Problem, error) {
	p := &optimize.Problem{
		MeanOutputTokens: f.MeanOutputTokens,
		MaxUtilization:   f.MaxUtilization,
		ShedPenaltyMs:    f.ShedPenaltyMs,
		NetworkMs:        map[string]map[string]float64{},
		Eligible:         map[string][]string{},
	}
	usable := map[string]schemas.FleetEngine{}
	for _, c := range caps {
		if c.capacity() < minCapacityRPS {
			continue
		}
		e := c.profile.engine
		e.Name, e.CapacityRps = c.fleet.Name, c.capacity()
		p.Engines = append(p.Engines, e)
		usable[c.fleet.Name] = c.fleet
	}
	if len(p.Engines) == 0 {
		return nil, errNoEngine
	}
	slices.SortFunc(p.Engines, func(a, b optimize.Engine) int { return cmp.Compare(a.Name, b.Name) })
	for _, c := range f.Clusters {
		p.Clusters = append(p.Clusters, optimize.Cluster{Name: c.Name, DemandRps: demand[c.Name]})
		row := map[string]float64{}
		elig := []string{}
		for _, e := range p.Engines {
			fe := usable[e.Name]
			ms, ok := f.NetworkMsBetween(c.Region, fe.Region)
			if ok && f.Eligible(c, fe) {
				row[e.Name] = ms
				elig = append(elig, e.Name)
			}
		}
		p.NetworkMs[c.Name] = row
		p.Eligible[c.Name] = elig
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// digest identifies a problem: the first 16 hex digits of the SHA-256 of
// its JSON (map keys sorted by encoding/json, so it is deterministic).
func digest(p *optimize.Problem) string {
	b, err := json.Marshal(p)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// sortedKeys returns m's keys in ascending order, so that output and
// floating-point sums never depend on map order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
