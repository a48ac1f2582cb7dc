package integration

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// The example fleets cite real data in their comments (Azure inter-region
// RTTs, SplitwiseSim GPU measurements) and promise a shape (one region
// short of capacity for its demand). These tests hold them to it, using the
// trimmed samples in testdata/ (see testdata/SOURCE.md).

var fleetFiles = []string{"deploy/fleets/compose.yaml", "deploy/fleets/example.yaml"}

// azureRegion maps the fleets' region names to the Azure data set's.
var azureRegion = map[string]string{
	"east-us": "East US", "west-us": "West US", "west-europe": "West Europe",
}

// skuHardware maps the fleets' SKUs to SplitwiseSim's hardware names.
var skuHardware = map[string]string{"h100": "h100-80gb", "a100": "a100-80gb"}

// loadFleet parses a fleet file with schemas.ParseFleet, as every ilb
// command does: unknown or misspelt fields, non-integer counts and invalid
// values are errors, and defaults are applied.
func loadFleet(t *testing.T, rel string) *schemas.Fleet {
	t.Helper()
	data, err := os.ReadFile(repoPath(rel))
	if err != nil {
		t.Fatal(err)
	}
	f, err := schemas.ParseFleet(data)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return f
}

// TestFleetFilesWellFormed adds to schemas' validation what these example
// files promise: shares that are fractions of total_demand_rps.
func TestFleetFilesWellFormed(t *testing.T) {
	for _, rel := range fleetFiles {
		t.Run(rel, func(t *testing.T) {
			f := loadFleet(t, rel)
			checkFleetShares(t, f)
			if f.TotalDemandRPS <= 0 {
				t.Errorf("total_demand_rps %v; the example fleets drive traffic, so set it", f.TotalDemandRPS)
			}
		})
	}
}

func checkFleetShares(t *testing.T, f *schemas.Fleet) {
	sum := 0.0
	for _, c := range f.Clusters {
		if c.DemandShare <= 0 {
			t.Errorf("cluster %s: demand_share %v", c.Name, c.DemandShare)
		}
		sum += c.DemandShare
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("demand shares sum to %v, want 1", sum)
	}
	if f.MaxUtilization <= 0 || f.MaxUtilization > 1 {
		t.Errorf("max_utilization %v outside (0, 1]", f.MaxUtilization)
	}
}

// TestFleetNetworkMatchesAzure checks network_ms against the Azure P95 RTT
// sample in both directions, and 1 ms within a region.
func TestFleetNetworkMatchesAzure(t *testing.T) {
	rtt := readAzureRTT(t)
	for _, rel := range fleetFiles {
		f := loadFleet(t, rel)
		for _, from := range sortedKeys(azureRegion) {
			for _, to := range sortedKeys(azureRegion) {
				got, ok := f.NetworkMs[from][to]
				want := 1.0
				if from != to {
					want = rtt[azureRegion[from]][azureRegion[to]]
				}
				if !ok || got != want {
					t.Errorf("%s: network_ms %s -> %s = %v (present %v), want %v", rel, from, to, got, ok, want)
				}
			}
		}
	}
}

// readAzureRTT returns source -> destination -> P95 RTT (ms).
func readAzureRTT(t *testing.T) map[string]map[string]float64 {
	rows := readCSV(t, "testdata/azure_rtt_p95_ms_sample.csv")
	out := map[string]map[string]float64{}
	for _, r := range rows[1:] {
		out[r[0]] = map[string]float64{}
		for j, cell := range r[1:] {
			if cell == "" {
				continue
			}
			v, err := strconv.ParseFloat(cell, 64)
			if err != nil {
				t.Fatalf("azure sample: %v", err)
			}
			out[r[0]][rows[0][j+1]] = v
		}
	}
	return out
}

// splitwisePerf is what the fleets derive from SplitwiseSim per SKU.
type splitwisePerf struct {
	prefillTokensPerS float64 // 8192-token prompt at batch 1
	base, perSeq      float64 // decode step line through batch 1 and 64 (ms)
}

func readSplitwise(t *testing.T) map[string]splitwisePerf {
	type key struct {
		hw          string
		prompt, bsz int
	}
	rows := readCSV(t, "testdata/splitwise_llama2_70b_tp4_sample.csv")
	prompt, token := map[key]float64{}, map[key]float64{}
	for _, r := range rows[1:] {
		p, _ := strconv.Atoi(r[3])
		b, _ := strconv.Atoi(r[4])
		k := key{r[1], p, b}
		prompt[k], _ = strconv.ParseFloat(r[7], 64)
		token[k], _ = strconv.ParseFloat(r[8], 64)
	}
	out := map[string]splitwisePerf{}
	for sku, hw := range skuHardware {
		t1, t64 := token[key{hw, 512, 1}], token[key{hw, 512, 64}]
		perSeq := (t64 - t1) / 63
		out[sku] = splitwisePerf{
			prefillTokensPerS: 8192 / (prompt[key{hw, 8192, 1}] / 1000),
			base:              t1 - perSeq,
			perSeq:            perSeq,
		}
	}
	return out
}

// TestFleetEnginesMatchSplitwise checks every engine's performance numbers
// are within 2% of what its SKU's measurements give.
func TestFleetEnginesMatchSplitwise(t *testing.T) {
	perf := readSplitwise(t)
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.02*want }
	for _, rel := range fleetFiles {
		for _, e := range loadFleet(t, rel).Engines {
			p, ok := perf[e.SKU]
			if !ok {
				t.Errorf("%s: engine %s has sku %q, not one of %v", rel, e.Name, e.SKU, sortedKeys(skuHardware))
				continue
			}
			if !near(e.PrefillTokensPerS, p.prefillTokensPerS) || !near(e.DecodeStepMs.Base, p.base) || !near(e.DecodeStepMs.PerSeq, p.perSeq) {
				t.Errorf("%s: engine %s (%s) prefill %v base %v per_seq %v; measurements give %.0f, %.2f, %.3f",
					rel, e.Name, e.SKU, e.PrefillTokensPerS, e.DecodeStepMs.Base, e.DecodeStepMs.PerSeq,
					p.prefillTokensPerS, p.base, p.perSeq)
			}
		}
	}
}

// roughCapacityRPS is the fleets' back-of-envelope capacity of one replica:
// each request costs its prefill plus its share of the decode steps of a
// full batch. promptTokens is the assumed mean prompt.
func roughCapacityRPS(e schemas.FleetEngine, promptTokens, outputTokens float64) float64 {
	stepS := (e.DecodeStepMs.Base + e.DecodeStepMs.PerSeq*float64(e.MaxBatch)) / 1000
	return 1 / (promptTokens/e.PrefillTokensPerS + outputTokens*stepS/float64(e.MaxBatch))
}

// TestFleetOneRegionShort checks the shape the fleets are built to show:
// exactly one region cannot serve its own demand within max_utilization,
// its clusters may spill (no residency), and the fleet as a whole can.
func TestFleetOneRegionShort(t *testing.T) {
	for _, rel := range fleetFiles {
		f := loadFleet(t, rel)
		capacity, demand := map[string]float64{}, map[string]float64{}
		for _, e := range f.Engines {
			replicas := float64(e.Replicas) // ParseFleet defaults it to 1
			capacity[e.Region] += replicas * f.MaxUtilization * roughCapacityRPS(e, 1024, f.MeanOutputTokens)
		}
		for _, c := range f.Clusters {
			demand[c.Region] += f.TotalDemandRPS * c.DemandShare
		}
		var short []string
		totalCap, totalDemand := 0.0, 0.0
		for _, region := range sortedKeys(demand) {
			totalCap += capacity[region]
			totalDemand += demand[region]
			if demand[region] > capacity[region] {
				short = append(short, region)
			}
		}
		if len(short) != 1 {
			t.Errorf("%s: regions short of capacity %v, want exactly one (capacity %v, demand %v)", rel, short, capacity, demand)
			continue
		}
		for _, c := range f.Clusters {
			if c.Region == short[0] && !slices.ContainsFunc(f.EligibleEngines(c), func(e schemas.FleetEngine) bool { return e.Region != c.Region }) {
				t.Errorf("%s: cluster %s in short region %s may use no engine elsewhere; it could only shed", rel, c.Name, short[0])
			}
		}
		if totalCap < totalDemand {
			t.Errorf("%s: fleet capacity %.1f rps < demand %.1f rps", rel, totalCap, totalDemand)
		}
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("%s: %d rows, %v", path, len(rows), err)
	}
	return rows
}
