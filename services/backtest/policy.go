package backtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ilb-router/ilb/services/backtest/peer"
	"github.com/ilb-router/ilb/solver/sched"
)

// Policy names, in the order `ilb backtest` lists them.
const (
	PolicyRoundRobin  = "round-robin"
	PolicyRandom      = "random"
	PolicyNearest     = "nearest"
	PolicyLeastLoaded = "least-loaded"
	PolicyHash        = "hash"
	PolicyPID         = "pid"
	PolicyOptimizer   = "optimizer"
)

// Policies lists every policy: ilb's own, the simple baselines and the
// peer routers of package peer. Each peer policy also runs limited to its
// cluster's region as NAME:local.
var Policies = slices.Concat([]string{PolicyRoundRobin, PolicyRandom, PolicyNearest, PolicyLeastLoaded,
	PolicyHash, PolicyPID, PolicyOptimizer}, peer.Names())

// ParsePolicies parses a comma-separated list of policies ("all" for
// every one), rejecting unknown and repeated names.
func ParsePolicies(s string) ([]string, error) { return parsePolicies(s, nil) }

// parsePolicies is ParsePolicies with the configured peer policies extra
// (Config.PeerPolicies) known too.
func parsePolicies(s string, extra []peer.Policy) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(Policies), nil
	}
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		_, _, isPeer := peer.LookupIn(extra, p)
		switch {
		case !slices.Contains(Policies, p) && !isPeer:
			return nil, fmt.Errorf("unknown policy %q (want %s, a peer policy with %s, or all)", p, strings.Join(Policies, ", "), peer.LocalSuffix)
		case slices.Contains(out, p):
			return nil, fmt.Errorf("policy %q given twice", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// policy routes the requests of one simulation.
type policy interface {
	// pick returns the engine for request i, pickShed or pickNoEngine.
	pick(s *sim, i int) int
	// control runs at every control tick.
	control(s *sim)
	// weights returns demand row c's current weights by engine index, or
	// nil for a policy without weights. Policies route per demand row (a
	// cluster's requests of one class; the cluster itself in a fleet of
	// one class): c is a row index wherever they say cluster.
	weights(c int) []float64
}

func newPolicy(name string, s *sim) (policy, error) {
	nc := s.fi.nrows()
	switch name {
	case PolicyRoundRobin:
		return &roundRobin{next: make([]int, nc)}, nil
	case PolicyRandom:
		return &random{rng: rand.New(rand.NewPCG(s.cfg.Seed, sched.HashKey(name))), scratch: make([]int32, 0, len(s.fi.engines))}, nil
	case PolicyNearest:
		return &nearest{next: make([]int, nc), scratch: make([]int32, 0, len(s.fi.engines))}, nil
	case PolicyLeastLoaded:
		return newLeastLoaded(s), nil
	case PolicyHash:
		return newHashPolicy(s)
	case PolicyPID:
		return newPID(s)
	case PolicyOptimizer:
		return newOptimizerPolicy(s)
	}
	if _, _, ok := peer.LookupIn(s.cfg.PeerPolicies, name); ok {
		return newPeerPolicy(s, name)
	}
	return nil, fmt.Errorf("backtest: unknown policy %q", name)
}

// static is embedded by policies without a controller or weights.
type static struct{}

func (static) control(*sim)          {}
func (static) weights(int) []float64 { return nil }

// roundRobin cycles over each cluster's eligible engines, skipping those
// known to be unhealthy.
type roundRobin struct {
	static
	next []int
}

func (p *roundRobin) pick(s *sim, i int) int {
	c := s.w.row[i]
	el := s.fi.elig[c]
	for k := range el {
		j := (p.next[c] + k) % len(el)
		if e := el[j]; s.healthy[e] {
			p.next[c] = (j + 1) % len(el)
			return int(e)
		}
	}
	return pickNoEngine
}

// random picks uniformly among the healthy eligible engines, from a
// generator seeded by the run's seed.
type random struct {
	static
	rng     *rand.Rand
	scratch []int32
}

func (p *random) pick(s *sim, i int) int {
	p.scratch = healthyEligible(s, int(s.w.row[i]), p.scratch[:0])
	if len(p.scratch) == 0 {
		return pickNoEngine
	}
	return int(p.scratch[p.rng.IntN(len(p.scratch))])
}

func healthyEligible(s *sim, c int, dst []int32) []int32 {
	for _, e := range s.fi.elig[c] {
		if s.healthy[e] {
			dst = append(dst, e)
		}
	}
	return dst
}

// nearest sends each request to the healthy eligible engine with the
// least network time from its cluster, round-robin among ties.
type nearest struct {
	static
	next    []int
	scratch []int32
}

func (p *nearest) pick(s *sim, i int) int {
	c := int(s.w.row[i])
	p.scratch = p.scratch[:0]
	best := 0.0
	for _, e := range s.fi.elig[c] {
		if !s.healthy[e] {
			continue
		}
		switch ms := s.fi.net[c][e]; {
		case len(p.scratch) == 0 || ms < best:
			best, p.scratch = ms, append(p.scratch[:0], e)
		case ms == best:
			p.scratch = append(p.scratch, e)
		}
	}
	if len(p.scratch) == 0 {
		return pickNoEngine
	}
	p.next[c]++
	return int(p.scratch[p.next[c]%len(p.scratch)])
}

// leastLoaded sends each request to the healthy eligible engine with the
// fewest requests in flight (running and queued, over its batch slots,
// max_batch × replicas), seeing the live state as a local greedy router
// would; ties go to the nearer engine, then round-robin.
type leastLoaded struct {
	static
	slots   []float64
	next    []int
	scratch []int32
}

func newLeastLoaded(s *sim) *leastLoaded {
	p := &leastLoaded{next: make([]int, s.fi.nrows()), scratch: make([]int32, 0, len(s.fi.engines))}
	for _, pr := range s.fi.params {
		p.slots = append(p.slots, float64(pr.MaxBatch*pr.Replicas))
	}
	return p
}

func (p *leastLoaded) pick(s *sim, i int) int {
	c := int(s.w.row[i])
	p.scratch = p.scratch[:0]
	bestLoad, bestNet := 0.0, 0.0
	for _, e := range s.fi.elig[c] {
		if !s.healthy[e] {
			continue
		}
		load, ms := float64(s.inflight[e])/p.slots[e], s.fi.net[c][e]
		switch {
		case len(p.scratch) == 0 || load < bestLoad || (load == bestLoad && ms < bestNet):
			bestLoad, bestNet, p.scratch = load, ms, append(p.scratch[:0], e)
		case load == bestLoad && ms == bestNet:
			p.scratch = append(p.scratch, e)
		}
	}
	if len(p.scratch) == 0 {
		return pickNoEngine
	}
	p.next[c]++
	return int(p.scratch[p.next[c]%len(p.scratch)])
}
