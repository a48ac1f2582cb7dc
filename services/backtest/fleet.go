package backtest

import (
	"fmt"
	"math"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/fleetmodel"
	"github.com/ilb-router/ilb/solver/engine"
)

// fleetInfo is the fleet file flattened into indexes for the loop.
type fleetInfo struct {
	f        *schemas.Fleet
	clusters []string
	engines  []string
	params   []engine.Params
	sku      []string
	// elig[c] lists the engines cluster c may use, in fleet order; net[c][e]
	// is the request overhead in ms, NaN when c may not use e.
	elig   [][]int32
	net    [][]float64
	remote [][]bool  // remote[c][e]: e is in another region than c
	demand []float64 // demand fraction by cluster
	engIdx map[string]int
	clIdx  map[string]int
}

func newFleetInfo(f *schemas.Fleet) (*fleetInfo, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("backtest: fleet: %w", err)
	}
	fi := &fleetInfo{f: f, engIdx: map[string]int{}, clIdx: map[string]int{}}
	for _, fe := range f.Engines {
		p, err := EngineParams(f, fe)
		if err != nil {
			return nil, err
		}
		fi.engIdx[fe.Name] = len(fi.engines)
		fi.engines = append(fi.engines, fe.Name)
		fi.params = append(fi.params, p)
		fi.sku = append(fi.sku, fe.SKU)
	}
	if len(fi.engines) > 1<<15 {
		return nil, fmt.Errorf("backtest: fleet: %d engines, at most %d", len(fi.engines), 1<<15)
	}
	for _, fc := range f.Clusters {
		fi.clIdx[fc.Name] = len(fi.clusters)
		fi.clusters = append(fi.clusters, fc.Name)
		fi.demand = append(fi.demand, f.DemandFraction(fc.Name))
		row := make([]float64, len(f.Engines))
		rem := make([]bool, len(f.Engines))
		var elig []int32
		for e, fe := range f.Engines {
			row[e] = math.NaN()
			rem[e] = fe.Region != fc.Region
			if f.Eligible(fc, fe) {
				row[e], _ = f.NetworkMsBetween(fc.Region, fe.Region)
				elig = append(elig, int32(e))
			}
		}
		if len(elig) == 0 {
			return nil, fmt.Errorf("backtest: fleet: cluster %q may use no engine", fc.Name)
		}
		fi.net = append(fi.net, row)
		fi.remote = append(fi.remote, rem)
		fi.elig = append(fi.elig, elig)
	}
	return fi, nil
}

// EngineParams returns the engine model parameters of fleet engine fe,
// as the engine simulator builds them (fleetmodel.Params): the fleet's
// numbers, zero ones taken from engine.DefaultParams of fe's SKU, and KV
// admission on (a request waits while the KV memory reserved by running
// ones would not hold it).
func EngineParams(f *schemas.Fleet, fe schemas.FleetEngine) (engine.Params, error) {
	p, err := fleetmodel.Params(f, fe)
	if err != nil {
		return engine.Params{}, fmt.Errorf("backtest: %w", err)
	}
	return p, nil
}

// engineIndex returns the index of the named engine.
func (fi *fleetInfo) engineIndex(name string) (int, bool) {
	i, ok := fi.engIdx[name]
	return i, ok
}

func (fi *fleetInfo) clusterIndex(name string) (int, bool) {
	i, ok := fi.clIdx[name]
	return i, ok
}
