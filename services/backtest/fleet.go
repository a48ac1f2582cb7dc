package backtest

import (
	"fmt"
	"math"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/fleetmodel"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/engine"
)

// fleetInfo is the fleet file flattened into indexes for the loop.
type fleetInfo struct {
	f        *schemas.Fleet
	clusters []string
	engines  []string
	params   []engine.Params
	sku      []string
	// Demand rows (routing.Rows): a cluster's requests of one request
	// class (model and prompt band); in a fleet of one class the rows are
	// the clusters, in fleet order. Routing state is per row: elig[r]
	// lists the engines row r may use (its cluster may use them and they
	// serve its class), in fleet order; net[r][e] is the request overhead
	// in ms, NaN when r may not use e; remote[r][e] says e is in another
	// region than r's cluster.
	rows       *routing.Rows
	rowName    []string
	rowCluster []int32   // by row: its fleet cluster
	rowShare   []float64 // by row: share of the fleet's demand (routing.RowShares)
	elig       [][]int32
	net        [][]float64
	remote     [][]bool
	demand     []float64 // demand fraction by cluster
	engIdx     map[string]int
	clIdx      map[string]int
	// pool keeps the engines of finished runs over this fleet for the
	// next ones (the rest of fleetInfo is read-only during runs).
	pool enginePool
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
	}
	fi.rows = routing.NewRows(f)
	fi.rowShare = routing.RowShares(f, fi.rows)
	for _, rw := range fi.rows.Rows {
		fc := f.Clusters[rw.Cluster]
		row := make([]float64, len(f.Engines))
		rem := make([]bool, len(f.Engines))
		var elig []int32
		for e, fe := range f.Engines {
			row[e] = math.NaN()
			rem[e] = fe.Region != fc.Region
			if f.Eligible(fc, fe) && fi.rows.Serves(rw.Class, e) {
				row[e], _ = f.NetworkMsBetween(fc.Region, fe.Region)
				elig = append(elig, int32(e))
			}
		}
		if len(elig) == 0 {
			return nil, fmt.Errorf("backtest: fleet: %q may use no engine", rw.Name)
		}
		fi.rowName = append(fi.rowName, rw.Name)
		fi.rowCluster = append(fi.rowCluster, int32(rw.Cluster))
		fi.net = append(fi.net, row)
		fi.remote = append(fi.remote, rem)
		fi.elig = append(fi.elig, elig)
	}
	return fi, nil
}

// nrows is the number of demand rows.
func (fi *fleetInfo) nrows() int { return len(fi.elig) }

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
