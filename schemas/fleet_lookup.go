package schemas

// NetworkMsBetween returns the request overhead from region a to region
// b: network_ms[a][b] if present, else network_ms[b][a] (a missing
// reverse direction is taken as symmetric). ok is false when neither is
// given; such a pair may not be used.
func (f *Fleet) NetworkMsBetween(a, b string) (ms float64, ok bool) {
	if ms, ok = f.NetworkMs[a][b]; ok { // indexing a nil inner map is fine
		return ms, true
	}
	ms, ok = f.NetworkMs[b][a]
	return ms, ok
}

// Eligible reports whether cluster may send requests to engine: a cluster
// with a residency uses only engines with the same residency, and the
// network pair between their regions must exist.
func (f *Fleet) Eligible(cluster FleetCluster, engine FleetEngine) bool {
	if cluster.Residency != "" && cluster.Residency != engine.Residency {
		return false
	}
	_, ok := f.NetworkMsBetween(cluster.Region, engine.Region)
	return ok
}

// EligibleEngines returns the engines cluster may use, in file order.
func (f *Fleet) EligibleEngines(cluster FleetCluster) []FleetEngine {
	var out []FleetEngine
	for _, e := range f.Engines {
		if f.Eligible(cluster, e) {
			out = append(out, e)
		}
	}
	return out
}

// Cluster returns the cluster with the given name.
func (f *Fleet) Cluster(name string) (FleetCluster, bool) {
	for _, c := range f.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return FleetCluster{}, false
}

// Engine returns the engine with the given name.
func (f *Fleet) Engine(name string) (FleetEngine, bool) {
	for _, e := range f.Engines {
		if e.Name == name {
			return e, true
		}
	}
	return FleetEngine{}, false
}

// Regions returns every region named in network_ms, sorted.
func (f *Fleet) Regions() []string {
	return sortedKeys(f.regionSet())
}

// DemandFraction returns cluster's share of total demand: its
// demand_share divided by the sum over clusters (0 if unknown).
func (f *Fleet) DemandFraction(cluster string) float64 {
	var total, mine float64
	for _, c := range f.Clusters {
		total += c.DemandShare
		if c.Name == cluster {
			mine = c.DemandShare
		}
	}
	if total <= 0 {
		return 0
	}
	return mine / total
}
