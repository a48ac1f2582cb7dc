package backtest

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest/peer"
)

// The published LMBench runs (llm-d-benchmark exp-3, H100): Llama-3.1-70B
// on 2 vLLM replicas, replayed from their per-request logs. The fleet is
// testdata/lmbench/fleet-llama31-70b-2xh100.yaml, calibrated on the
// vllm-standalone sharegpt run at 4 QPS (its comments and
// services/backtest/README.md say how).

const (
	lmbenchFleetFile = "testdata/lmbench/fleet-llama31-70b-2xh100.yaml"
	lmbenchVLLM      = "vllm-standalone-llama-3-70b-2replicas-H100"
	lmbenchLLMD      = "llm-d-70b-2replicas-H100"
)

// lmbenchMeasured is one row of summary_by_qps.csv.
type lmbenchMeasured struct {
	n                         int
	ttftP50, ttftP90, tpotP50 float64
}

// readLMBenchSummary reads the measured percentiles of the sharegpt runs,
// by stack and QPS.
func readLMBenchSummary(t testing.TB) map[string]map[float64]lmbenchMeasured {
	t.Helper()
	f, err := os.Open("testdata/lmbench/summary_by_qps.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[float64]lmbenchMeasured{}
	for _, r := range rows[1:] { // stack,scenario,load,n,prompt_tokens_p50,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,tpot_p50_ms,...
		if r[1] != "sharegpt" {
			continue
		}
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("summary %v: %v", r, err)
			}
			return v
		}
		if out[r[0]] == nil {
			out[r[0]] = map[float64]lmbenchMeasured{}
		}
		out[r[0]][num(r[2])] = lmbenchMeasured{n: int(num(r[3])), ttftP50: num(r[5]), ttftP90: num(r[6]), tpotP50: num(r[8])}
	}
	return out
}

func loadFleet(t testing.TB, path string) *schemas.Fleet {
	t.Helper()
	f, err := schemas.LoadFleet(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// replayLMBench replays one log over f with policy and returns its
// result.
func replayLMBench(t testing.TB, f *schemas.Fleet, path, policy string) PolicyResult {
	t.Helper()
	tr, err := ReadTraceFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return run(t, f, tr, func(c *Config) {
		c.Policies, c.Parallel = []string{policy}, 1
		c.PeerPolicies = []peer.Policy{peer.LLMD(peer.LLMDPrefixLoadConfig())}
	}).Policies[0]
}

func relErr(sim, meas float64) float64 { return sim/meas - 1 }

// lmbenchDataDir is the directory of the full published data
// (../shared/data/llmd_lmbench_h100 in the development tree), or "" to
// skip the tests that need every load point.
func lmbenchDataDir(t *testing.T) string {
	dir := os.Getenv("ILB_LMBENCH")
	if dir == "" {
		t.Skip("set ILB_LMBENCH to the llmd_lmbench_h100 data directory to replay every load point")
	}
	return dir
}

func lmbenchLog(dir, stack string, qps float64) string {
	return filepath.Join(dir, stack, fmt.Sprintf("LMBench_sharegpt_output_%g.csv", qps))
}

// lmbenchSchedulers are the two engine models, each with its fleet file,
// calibrated the same way.
var lmbenchSchedulers = []struct{ name, fleet string }{
	{schemas.SchedulerChunked, lmbenchFleetFile},
	{schemas.SchedulerWhole, "testdata/lmbench/fleet-llama31-70b-2xh100-whole.yaml"},
}

// lmbenchCalibrate fits an engine's prefill_tokens_per_s and
// decode_step_ms.base to the vllm-standalone sharegpt run at 4 QPS, the
// calibration point: the values whose replay with round-robin comes
// closest to the measured TTFT p50 and TPOT p50 (least squares of the log
// ratios), searched on a grid of 1000 tokens/s by 2 ms, then of 250
// tokens/s by 0.5 ms around the best. At 4 QPS nothing queues for long, so
// those two numbers are set by the prefill rate and the decode step; the
// per-sequence slope cannot be told from the base at one light point and
// stays at Splitwise's h100 fit (0.3343 ms), and kv_cache_tokens and
// max_batch come from memory arithmetic and vLLM's defaults (see the
// fleet file).
func lmbenchCalibrate(t *testing.T, base *schemas.Fleet, log string, meas lmbenchMeasured) (rate, stepBase float64) {
	t.Helper()
	best := math.Inf(1)
	try := func(r, b float64) {
		if e := lmbenchFitError(t, base, log, meas, r, b); e < best {
			best, rate, stepBase = e, r, b
		}
	}
	for r := 8000.0; r <= 20000; r += 1000 {
		for b := 15.0; b <= 35; b += 2 {
			try(r, b)
		}
	}
	r0, b0 := rate, stepBase
	for r := r0 - 1000; r <= r0+1000; r += 250 {
		for b := b0 - 2; b <= b0+2; b += 0.5 {
			try(r, b)
		}
	}
	return rate, stepBase
}

// lmbenchFitError replays log over base with every engine's prefill rate
// r and decode base b, and returns the calibration's error: the sum of the
// squared log ratios of simulated to measured TTFT p50 and TPOT p50.
func lmbenchFitError(t *testing.T, base *schemas.Fleet, log string, meas lmbenchMeasured, r, b float64) float64 {
	t.Helper()
	f := *base
	f.Engines = slices.Clone(base.Engines)
	for i := range f.Engines {
		f.Engines[i].PrefillTokensPerS, f.Engines[i].DecodeStepMs.Base = r, b
	}
	res := replayLMBench(t, &f, log, PolicyRoundRobin)
	return math.Pow(math.Log(res.TTFTMs.P50/meas.ttftP50), 2) + math.Pow(math.Log(res.TBOTMs.P50/meas.tpotP50), 2)
}

// lmbenchLocalBest returns the best of the fleet's prefill rate and decode
// base and their 8 neighbours on the calibration's fine grid.
func lmbenchLocalBest(t *testing.T, base *schemas.Fleet, log string, meas lmbenchMeasured) (rate, stepBase float64) {
	t.Helper()
	r0, b0 := base.Engines[0].PrefillTokensPerS, base.Engines[0].DecodeStepMs.Base
	best := math.Inf(1)
	for _, r := range []float64{r0, r0 - 250, r0 + 250} {
		for _, b := range []float64{b0, b0 - 0.5, b0 + 0.5} {
			if e := lmbenchFitError(t, base, log, meas, r, b); e < best {
				best, rate, stepBase = e, r, b
			}
		}
	}
	return rate, stepBase
}

// TestLMBenchCalibration re-runs the calibration and checks that the
// committed fleet files hold its result.
func TestLMBenchCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("about 220 replays per scheduler")
	}
	meas := readLMBenchSummary(t)[lmbenchVLLM][4]
	for _, s := range lmbenchSchedulers {
		f, err := schemas.LoadFleet(s.fleet)
		if err != nil {
			t.Fatal(err)
		}
		log := "testdata/lmbench/vllm-standalone_sharegpt_4.csv.gz"
		var rate, base float64
		if raceEnabled {
			// Under -race the grid takes long; check that the committed
			// values beat their grid neighbours instead.
			rate, base = lmbenchLocalBest(t, f, log, meas)
		} else {
			rate, base = lmbenchCalibrate(t, f, log, meas)
		}
		for _, e := range f.Engines {
			if e.Scheduler != s.name || e.PrefillTokensPerS != rate || e.DecodeStepMs.Base != base {
				t.Errorf("%s: engine %s has scheduler %s, prefill %v tokens/s, decode base %v ms; the calibration gives %v and %v",
					s.fleet, e.Name, e.Scheduler, e.PrefillTokensPerS, e.DecodeStepMs.Base, rate, base)
			}
		}
	}
}

// lmbenchStacks are the two published stacks and the policy that models
// each one's router: the plain Kubernetes Service (round-robin) and the
// llm-d EPP as that experiment configured it (prefix-aware scorer weight
// 2, load-aware weight 1: peer.LLMDPrefixLoadConfig).
var lmbenchStacks = []struct{ stack, policy string }{
	{lmbenchVLLM, PolicyRoundRobin},
	{lmbenchLLMD, peer.LLMDPrefixLoadConfig().Name},
}

// TestLMBenchTable replays every sharegpt load point of both stacks with
// both schedulers and prints the error table of services/backtest's
// README (go test -run TestLMBenchTable -v with ILB_LMBENCH set).
func TestLMBenchTable(t *testing.T) {
	dir := lmbenchDataDir(t)
	meas := readLMBenchSummary(t)
	var b strings.Builder
	b.WriteString("| stack | QPS | n | scheduler | TTFT p50 ms: measured / simulated / error | TTFT p90 ms: measured / simulated / error | TPOT p50 ms: measured / simulated / error |\n")
	b.WriteString("| --- | ---: | ---: | --- | --- | --- | --- |\n")
	for _, st := range lmbenchStacks {
		for _, q := range []float64{4, 8, 12, 16, 20, 24, 28, 32, 36, 40} {
			m, ok := meas[st.stack][q]
			if !ok {
				t.Fatalf("%s %g QPS: no summary row", st.stack, q)
			}
			for _, s := range lmbenchSchedulers {
				r := replayLMBench(t, loadFleet(t, s.fleet), lmbenchLog(dir, st.stack, q), st.policy)
				if r.Served != m.n {
					t.Errorf("%s %g QPS: served %d of the log's %d", st.stack, q, r.Served, m.n)
				}
				fmt.Fprintf(&b, "| %s | %g | %d | %s | %s | %s | %s |\n", shortStack(st.stack), q, m.n, s.name,
					errCell(m.ttftP50, r.TTFTMs.P50, "%.0f"), errCell(m.ttftP90, r.TTFTMs.P90, "%.0f"), errCell(m.tpotP50, r.TBOTMs.P50, "%.1f"))
			}
		}
	}
	t.Log("\n" + b.String())
}

func shortStack(s string) string {
	if s == lmbenchVLLM {
		return "vllm-standalone"
	}
	return "llm-d"
}

func errCell(meas, sim float64, format string) string {
	return fmt.Sprintf(format+" / "+format+" / %+.0f%%", meas, sim, 100*relErr(sim, meas))
}

// TestLMBenchReproduction pins the model's fidelity to the published
// vllm-standalone runs at a light point (4 QPS, the calibration point), at
// the knee (8 QPS) and saturated (40 QPS), from the logs in testdata, so
// that a change to the engine model that moves it away from the
// measurements fails here. Bounds are on simulated/measured − 1 and hold
// what the model does today (README: "Reproducing published runs"); the
// saturated TTFT is a known miss, pinned as such: the measured stack's
// throughput collapses past 12 QPS (preemption under KV pressure, which
// the model does not have), so the model's TTFT is 3× too low there.
func TestLMBenchReproduction(t *testing.T) {
	meas := readLMBenchSummary(t)[lmbenchVLLM]
	type bound struct{ lo, hi float64 }
	for _, c := range []struct {
		scheduler              string
		qps                    float64
		ttftP50, ttftP90, tpot bound
	}{
		{schemas.SchedulerChunked, 4, bound{-0.05, 0.05}, bound{-0.35, 0}, bound{-0.05, 0.05}},
		{schemas.SchedulerChunked, 8, bound{0, 0.35}, bound{-0.45, 0}, bound{0, 0.10}},
		{schemas.SchedulerChunked, 40, bound{-0.75, -0.6}, bound{-0.75, -0.6}, bound{0, 0.10}},
		{schemas.SchedulerWhole, 4, bound{-0.05, 0.05}, bound{-0.3, 0}, bound{-0.05, 0.05}},
		{schemas.SchedulerWhole, 8, bound{0.8, 1.5}, bound{-0.3, 0}, bound{0, 0.15}},
		{schemas.SchedulerWhole, 40, bound{-0.75, -0.6}, bound{-0.75, -0.6}, bound{0, 0.15}},
	} {
		fleet := lmbenchFleetFile
		if c.scheduler == schemas.SchedulerWhole {
			fleet = lmbenchSchedulers[1].fleet
		}
		m := meas[c.qps]
		r := replayLMBench(t, loadFleet(t, fleet), fmt.Sprintf("testdata/lmbench/vllm-standalone_sharegpt_%g.csv.gz", c.qps), PolicyRoundRobin)
		for _, x := range []struct {
			name      string
			sim, meas float64
			b         bound
		}{
			{"TTFT p50", r.TTFTMs.P50, m.ttftP50, c.ttftP50},
			{"TTFT p90", r.TTFTMs.P90, m.ttftP90, c.ttftP90},
			{"TPOT p50", r.TBOTMs.P50, m.tpotP50, c.tpot},
		} {
			if e := relErr(x.sim, x.meas); !(e >= x.b.lo && e <= x.b.hi) {
				t.Errorf("%s, %g QPS: %s simulated %.1f ms, measured %.1f ms: error %+.0f%%, want within [%+.0f%%, %+.0f%%]",
					c.scheduler, c.qps, x.name, x.sim, x.meas, 100*e, 100*x.b.lo, 100*x.b.hi)
			}
		}
	}
}
