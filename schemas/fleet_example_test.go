package schemas

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestExampleFleetShape(t *testing.T) {
	f := ExampleFleet()
	if got := strings.Join(f.Regions(), ","); got != "east-us,west-europe,west-us" {
		t.Errorf("regions %s", got)
	}
	skus := map[string]int{}
	for _, e := range f.Engines {
		skus[e.SKU]++
	}
	if len(f.Clusters) != 3 || skus["h100"] == 0 || skus["a100"] == 0 {
		t.Errorf("want 3 clusters and mixed SKUs, got %d clusters, %v", len(f.Clusters), skus)
	}
	eu, ok := f.Cluster("fe-eu")
	if !ok || eu.Residency != "eu" {
		t.Fatalf("fe-eu = %+v, %v; want residency eu", eu, ok)
	}
	for _, e := range f.EligibleEngines(eu) {
		if e.Region != "west-europe" {
			t.Errorf("fe-eu may use %s in %s", e.Name, e.Region)
		}
	}
	// Each call returns a fresh copy.
	f.Engines[0].Name = "changed"
	if ExampleFleet().Engines[0].Name == "changed" {
		t.Error("ExampleFleet shares state between calls")
	}
}

// capacityRPS estimates an engine's throughput for requests of prompt
// and output tokens: decode at max batch plus its prefill, in sequence.
func capacityRPS(e FleetEngine, prompt, output float64) float64 {
	step := e.DecodeStepMs.Base + e.DecodeStepMs.PerSeq*float64(e.MaxBatch)
	decodeSecPerReq := output * step / 1000 / float64(e.MaxBatch)
	return float64(e.Replicas) / (decodeSecPerReq + prompt/e.PrefillTokensPerS)
}

func TestExampleFleetWestIsShort(t *testing.T) {
	f := ExampleFleet()
	capacity := map[string]float64{}
	for _, e := range f.Engines {
		capacity[e.Region] += capacityRPS(e, 1000, f.MeanOutputTokens)
	}
	demand := map[string]float64{}
	var totalCap float64
	for _, c := range f.Clusters {
		demand[c.Region] += f.TotalDemandRPS * f.DemandFraction(c.Name)
	}
	for region, c := range capacity {
		totalCap += c
		short := demand[region] > c*f.MaxUtilization
		if short != (region == "west-us") {
			t.Errorf("%s: demand %.1f rps, capacity %.1f rps: short=%v", region, demand[region], c, short)
		}
	}
	if f.TotalDemandRPS >= totalCap*f.MaxUtilization {
		t.Errorf("fleet as a whole is short: demand %.1f, capacity %.1f", f.TotalDemandRPS, totalCap)
	}
}

// readCSV returns the rows of a testdata CSV file, header first.
func readCSV(t *testing.T, name string) [][]string {
	t.Helper()
	file, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	rows, err := csv.NewReader(file).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestExampleFleetCalibration recomputes the engine numbers from the
// SplitwiseSim measurements the YAML comments cite.
func TestExampleFleetCalibration(t *testing.T) {
	type key struct {
		hw                   string
		prompt, batch, token int
	}
	prompt, token := map[key]float64{}, map[key]float64{}
	for _, r := range readCSV(t, "splitwise_llama2-70b_tp4.csv")[1:] {
		p, _ := strconv.Atoi(r[3])
		b, _ := strconv.Atoi(r[4])
		tk, _ := strconv.Atoi(r[5])
		k := key{r[1], p, b, tk}
		prompt[k], _ = strconv.ParseFloat(r[7], 64)
		token[k], _ = strconv.ParseFloat(r[8], 64)
	}
	for sku, hw := range map[string]string{"h100": "h100-80gb", "a100": "a100-80gb"} {
		prefill := 8192 / prompt[key{hw, 8192, 1, 128}] * 1000
		base := token[key{hw, 512, 1, 128}]
		perSeq := (token[key{hw, 512, 64, 128}] - base) / 63
		for _, e := range ExampleFleet().Engines {
			if e.SKU != sku {
				continue
			}
			if math.Abs(e.PrefillTokensPerS-prefill) > 1 || math.Abs(e.DecodeStepMs.Base-base) > 0.005 ||
				math.Abs(e.DecodeStepMs.PerSeq-perSeq) > 0.0005 || e.MaxBatch != 64 {
				t.Errorf("%s: prefill %v, step %+v; data says %.0f, {%.2f %.3f}", e.Name,
					e.PrefillTokensPerS, e.DecodeStepMs, prefill, base, perSeq)
			}
		}
	}
}

// TestExampleFleetRTT checks network_ms against the Azure P95 RTT matrix.
func TestExampleFleetRTT(t *testing.T) {
	rows := readCSV(t, "azure_rtt_p95_3regions.csv")
	region := func(azure string) string { return strings.ReplaceAll(strings.ToLower(azure), " ", "-") }
	f := ExampleFleet()
	checked := 0
	for _, r := range rows[1:] {
		for j, cell := range r[1:] {
			from, to := region(r[0]), region(rows[0][j+1])
			got, ok := f.NetworkMs[from][to]
			if cell == "" { // diagonal: 1 ms assumed
				if !ok || got != 1 {
					t.Errorf("network_ms[%s][%s] = %v, %v; want 1", from, to, got, ok)
				}
				continue
			}
			want, _ := strconv.ParseFloat(cell, 64)
			if !ok || got != want {
				t.Errorf("network_ms[%s][%s] = %v, %v; Azure P95 RTT is %v", from, to, got, ok, want)
			}
			checked++
		}
	}
	if checked != 6 {
		t.Errorf("checked %d pairs, want 6", checked)
	}
}

// TestExampleFleetModels: the example fleet serves two models, one on
// every engine and one on a subset that every cluster can reach (one
// engine per region); ExampleFleetOneModel has one implicit model.
func TestExampleFleetModels(t *testing.T) {
	f := ExampleFleet()
	ms := f.Models()
	if len(ms) != 2 || len(f.Classes()) != 2 {
		t.Fatalf("models %v, classes %v: want two models, one class each", ms, f.Classes())
	}
	served := map[string]int{}
	for _, e := range f.Engines {
		for _, m := range f.EngineModels(e) {
			served[m]++
		}
	}
	everywhere, subset := 0, 0
	for _, m := range ms {
		switch n := served[m]; {
		case n == len(f.Engines):
			everywhere++
		case n > 0:
			subset++
		}
	}
	if everywhere != 1 || subset != 1 {
		t.Fatalf("engines per model %v: want one model everywhere and one on a subset", served)
	}
	for _, c := range f.Clusters {
		mix, err := f.ModelMix(c)
		if err != nil || len(mix) != 2 {
			t.Fatalf("cluster %s: model mix %v %v", c.Name, mix, err)
		}
		for _, m := range ms {
			reach := false
			for _, e := range f.EligibleEngines(c) {
				reach = reach || f.ServesModel(e, m)
			}
			if !reach {
				t.Errorf("cluster %s reaches no engine serving %s", c.Name, m)
			}
		}
	}
	one := ExampleFleetOneModel()
	if one.ExplicitModels() || len(one.Classes()) != 1 || len(one.Engines) != len(f.Engines) {
		t.Fatalf("ExampleFleetOneModel: explicit %v, classes %v", one.ExplicitModels(), one.Classes())
	}
	if err := one.Validate(); err != nil {
		t.Fatal(err)
	}
}
