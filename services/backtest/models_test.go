package backtest_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest"
)

// sharedModelsFleet serves two models from one region: "big" on big-0,
// big-1 and the shared engine, "small" on the shared engine only, which
// has two replicas. An engine of one replica holds 16 sequences; with 50
// output tokens of 20 ms each it serves about 16 requests a second.
const sharedModelsFleet = `
max_utilization: 0.95
block_tokens: 512
mean_output_tokens: 50
ttft_slo_ms: 1500
tbot_slo_ms: 100
network_ms: {a: {a: 1}}
default_model: big
clusters:
  - {name: fe, region: a, demand_share: 1}
engines:
  - {name: big-0, region: a, sku: test, prefill_tokens_per_s: 20000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 16, kv_cache_tokens: 200000, models: [big]}
  - {name: big-1, region: a, sku: test, prefill_tokens_per_s: 20000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 16, kv_cache_tokens: 200000, models: [big]}
  - {name: shared, region: a, sku: test, prefill_tokens_per_s: 20000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 16, kv_cache_tokens: 200000, models: [big, small], replicas: 2}
`

// splitFleets are the same engines run as one ilb per model, the shared
// engine's two replicas split in advance: one serves big, one small.
func splitFleets(t *testing.T) (big, small *schemas.Fleet) {
	t.Helper()
	joint := parse(t, sharedModelsFleet)
	big, small = parse(t, sharedModelsFleet), parse(t, sharedModelsFleet)
	big.Engines[2].Replicas, big.Engines[2].Models = 1, []string{"big"}
	small.Engines = []schemas.FleetEngine{joint.Engines[2]}
	small.Engines[0].Replicas, small.Engines[0].Models = 1, []string{"small"}
	small.DefaultModel = "small"
	for _, f := range []*schemas.Fleet{big, small} {
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	return big, small
}

func parse(t *testing.T, yaml string) *schemas.Fleet {
	t.Helper()
	f, err := schemas.ParseFleet([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// twoModelTrace: single-turn requests of 512 prompt and 50 output tokens
// for 90 s, bigRPS of "big" and smallRPS of "small", evenly spaced; only
// the requests of model keep, or all when keep is empty.
func twoModelTrace(bigRPS, smallRPS float64, keep string) *backtest.Trace {
	tr := &backtest.Trace{Format: backtest.FormatCSV}
	add := func(model string, rps float64) {
		if keep != "" && model != keep {
			return
		}
		for k := range int(90 * rps) {
			tr.Requests = append(tr.Requests, backtest.Request{
				ArrivalNs: int64(float64(k) / rps * 1e9), Cluster: "fe", Conversation: fmt.Sprintf("%s-%d", model, k),
				InputTokens: 512, OutputTokens: 50, Blocks: []uint64{uint64(len(tr.Requests)) + 1e6}, Model: model,
			})
		}
	}
	add("big", bigRPS)
	add("small", smallRPS)
	slices.SortStableFunc(tr.Requests, func(a, b backtest.Request) int { return int(a.ArrivalNs - b.ArrivalNs) })
	return tr
}

func runModels(t *testing.T, f *schemas.Fleet, tr *backtest.Trace, policies []string, requests string) *backtest.Result {
	t.Helper()
	cfg := backtest.DefaultConfig()
	cfg.Fleet, cfg.Policies = f, policies
	b, err := backtest.New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	var rf *backtest.RequestsFile
	if requests != "" {
		if rf, err = backtest.CreateRequests(requests); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rf != nil {
		if err := rf.Write(b, res); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// TestTwoModelsBacktest is the backtest: over a fleet where one
// engine serves both models, the per-request records show no request on
// an engine that lacks its model, under every policy; and ilb's joint
// solve attains the SLO at least as often as one ilb per model with the
// shared engine's replicas split between the models in advance. The
// small model needs about 1.5 of the shared engine's replicas and the big
// one fits on its own engines, so the joint solve gives the shared engine
// to the small model, which a fixed split cannot.
func TestTwoModelsBacktest(t *testing.T) {
	if testing.Short() {
		t.Skip("three backtests of 90 s of traffic")
	}
	joint := parse(t, sharedModelsFleet)
	const bigRPS, smallRPS = 20, 22
	path := filepath.Join(t.TempDir(), "requests.csv")
	policies := []string{backtest.PolicyOptimizer, backtest.PolicyRoundRobin, backtest.PolicyLeastLoaded, "llm-d"}
	res := runModels(t, joint, twoModelTrace(bigRPS, smallRPS, ""), policies, path)
	checkRecordsEligible(t, joint, path)

	bigFleet, smallFleet := splitFleets(t)
	opt := []string{backtest.PolicyOptimizer}
	big := runModels(t, bigFleet, twoModelTrace(bigRPS, smallRPS, "big"), opt, "").Policies[0]
	small := runModels(t, smallFleet, twoModelTrace(bigRPS, smallRPS, "small"), opt, "").Policies[0]
	split := (big.SLOAttainment*float64(big.Requests) + small.SLOAttainment*float64(small.Requests)) / float64(big.Requests+small.Requests)
	ilb := res.Policies[0]
	t.Logf("SLO attainment: joint %.4f (%d requests); split %.4f (big %.4f of %d, small %.4f of %d)",
		ilb.SLOAttainment, ilb.Requests, split, big.SLOAttainment, big.Requests, small.SLOAttainment, small.Requests)
	if ilb.Requests != big.Requests+small.Requests {
		t.Fatalf("joint run has %d requests, the split ones %d", ilb.Requests, big.Requests+small.Requests)
	}
	if ilb.SLOAttainment < split {
		t.Errorf("joint SLO attainment %.4f below one ilb per model with the shared engine split in advance (%.4f)", ilb.SLOAttainment, split)
	}
}

// checkRecordsEligible reads the --requests CSV and fails for any request
// served by, or sent to, an engine that does not serve its model.
func checkRecordsEligible(t *testing.T, f *schemas.Fleet, path string) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	rows, err := csv.NewReader(file).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); !strings.HasSuffix(got, ",output_tokens,model") {
		t.Fatalf("header %s: want the model column last", got)
	}
	perPolicy := map[string]int{}
	for _, r := range rows[1:] {
		policy, engine, model := r[0], r[5], r[13]
		perPolicy[policy]++
		if model != "big" && model != "small" {
			t.Fatalf("row %v: model %q", r, model)
		}
		if engine == "" {
			continue
		}
		e, ok := f.Engine(engine)
		if !ok || !f.ServesModel(e, model) {
			t.Errorf("%s sent a %s request to %s, which does not serve it", policy, model, engine)
		}
	}
	if len(perPolicy) != 4 {
		t.Errorf("records of %d policies, want 4: %v", len(perPolicy), perPolicy)
	}
}

// TestModelsFromTraceAndMix: a CSV trace's model column is read and
// written back; a trace without one takes the clusters' model_shares,
// the same model for every turn of a conversation; requests for a model
// no engine serves fail.
func TestModelsFromTraceAndMix(t *testing.T) {
	csvText := "timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks,model\n" +
		"0,fe,c1,100,5,1,small\n10,fe,c2,100,5,2,big\n20,fe,c3,100,5,3,gpt-4\n"
	tr, err := backtest.ReadTrace(strings.NewReader(csvText), backtest.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Requests[0].Model != "small" || tr.Requests[2].Model != "gpt-4" {
		t.Fatalf("models %+v", tr.Requests)
	}
	var out strings.Builder
	if err := backtest.WriteCSV(&out, tr); err != nil || !strings.Contains(out.String(), ",model\n") || !strings.Contains(out.String(), ",small\n") {
		t.Fatalf("written back: %v\n%s", err, out.String())
	}
	res := runModels(t, parse(t, sharedModelsFleet), tr, []string{backtest.PolicyRoundRobin}, "")
	if p := res.Policies[0]; p.Served != 2 || p.Requests != 3 {
		t.Errorf("served %d of %d, want the gpt-4 request failed", p.Served, p.Requests)
	}

	mixed := strings.Replace(sharedModelsFleet, "demand_share: 1}", "demand_share: 1, model_shares: {big: 1, small: 3}}", 1)
	f := parse(t, mixed)
	tr = twoModelTrace(10, 0, "")
	for i := range tr.Requests {
		tr.Requests[i].Model = ""
		tr.Requests[i].Conversation = fmt.Sprintf("conv-%d", i/2) // two turns each
	}
	if err := tr.AssignModels(f); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for i, r := range tr.Requests {
		n[r.Model]++
		if i%2 == 1 && r.Model != tr.Requests[i-1].Model {
			t.Fatalf("conversation %s changed model", r.Conversation)
		}
	}
	if share := float64(n["small"]) / float64(len(tr.Requests)); share < 0.65 || share > 0.85 {
		t.Errorf("small got %.2f of the requests, want about 0.75 (%v)", share, n)
	}
	noDefault := strings.Replace(sharedModelsFleet, "default_model: big\n", "", 1)
	tr = twoModelTrace(1, 0, "")
	tr.Requests[0].Model = ""
	if err := tr.AssignModels(parse(t, noDefault)); err == nil || !strings.Contains(err.Error(), "model_shares") {
		t.Errorf("a trace without models over a fleet that cannot tell: %v", err)
	}
}
