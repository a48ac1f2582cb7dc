package optimize

import (
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
)

// rttTable is the Azure inter-region P95 RTT matrix in testdata (see
// testdata/SOURCE.md).
type rttTable struct {
	regions []string
	ms      [][]float64 // NaN on the diagonal
}

var loadRTT = sync.OnceValues(func() (*rttTable, error) {
	f, err := os.Open("testdata/azure_rtt_p95_ms.csv")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	t := &rttTable{regions: rows[0][1:]}
	for _, row := range rows[1:] {
		line := make([]float64, len(t.regions))
		for j, cell := range row[1:] {
			if cell == "" {
				continue
			}
			if line[j], err = strconv.ParseFloat(cell, 64); err != nil {
				return nil, fmt.Errorf("rtt csv: %w", err)
			}
		}
		t.ms = append(t.ms, line)
	}
	return t, nil
})

func rttOrFatal(tb testing.TB) *rttTable {
	tb.Helper()
	t, err := loadRTT()
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// fleetSpec shapes a random fleet.
type fleetSpec struct {
	clusters, engines int
	load              float64 // total demand / total load cap
	regions           int     // how many Azure regions host the fleet
	restricted        float64 // fraction of clusters with an eligibility list
}

// randomFleet places clusters and engines in real Azure regions; a
// request's network time is the P95 RTT between the regions (1 ms inside
// one) plus up to 2 ms of jitter per pair. Engines differ in capacity and
// latency profile; a few clusters may only use engines within 100 ms.
func randomFleet(tb testing.TB, rng *rand.Rand, s fleetSpec) *Problem {
	t := rttOrFatal(tb)
	regions := rng.Perm(len(t.regions))[:s.regions]
	p := &Problem{MeanOutputTokens: 200, MaxUtilization: 0.9, ShedPenaltyMs: 60000,
		NetworkMs: map[string]map[string]float64{}}
	engRegion := make([]int, s.engines)
	capTotal := 0.0
	for i := range s.engines {
		engRegion[i] = regions[rng.IntN(len(regions))]
		e := Engine{
			Name:        fmt.Sprintf("eng-%04d", i),
			CapacityRps: 20 + 180*rng.Float64(),
			TTFT:        TTFT{BaseMs: 80 + 200*rng.Float64(), QueueMs: 20 + 80*rng.Float64()},
			TBOT:        TBOT{BaseMs: 10 + 30*rng.Float64(), SlopeMs: 2 + 20*rng.Float64()},
		}
		capTotal += e.CapacityRps * p.MaxUtilization
		p.Engines = append(p.Engines, e)
	}
	shares := make([]float64, s.clusters)
	sum := 0.0
	for i := range shares {
		shares[i] = 0.2 + rng.ExpFloat64()
		sum += shares[i]
	}
	for i := range s.clusters {
		name := fmt.Sprintf("fe-%03d", i)
		region := regions[rng.IntN(len(regions))]
		p.Clusters = append(p.Clusters, Cluster{Name: name, DemandRps: s.load * capTotal * shares[i] / sum})
		row := make(map[string]float64, s.engines)
		var elig []string
		restricted := rng.Float64() < s.restricted
		for j, e := range p.Engines {
			ms := 1.0
			if region != engRegion[j] {
				ms = t.ms[region][engRegion[j]]
			}
			ms += 2 * rng.Float64()
			row[e.Name] = ms
			if restricted && ms < 100 {
				elig = append(elig, e.Name)
			}
		}
		p.NetworkMs[name] = row
		if restricted {
			if p.Eligible == nil {
				p.Eligible = map[string][]string{}
			}
			p.Eligible[name] = elig
		}
	}
	return p
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// perturbDemand returns a copy of p whose cluster demands are scaled by
// independent factors in [1−f, 1+f].
func perturbDemand(p *Problem, rng *rand.Rand, f float64) *Problem {
	q := *p
	q.Clusters = append([]Cluster(nil), p.Clusters...)
	for i := range q.Clusters {
		q.Clusters[i].DemandRps *= 1 - f + 2*f*rng.Float64()
	}
	return &q
}
