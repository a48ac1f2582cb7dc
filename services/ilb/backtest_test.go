package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	btFleet = "../backtest/testdata/fleet-3region.yaml"
	btTrace = "../backtest/testdata/mooncake_conversation_20m.jsonl"
)

func TestBacktestCommand(t *testing.T) {
	dir := t.TempDir()
	jsonPath, reportDir := filepath.Join(dir, "out.json"), filepath.Join(dir, "report")
	args := []string{"backtest", "--fleet", btFleet, "--trace", btTrace, "--duration", "2m",
		"--policy", "round-robin,hash,optimizer", "--seed", "7", "--json", jsonPath, "--report", reportDir,
		"--swing", "cluster=fe-east,factor=2,from=30s,to=60s", "--fail", "engine=west-1,at=40s,for=30s"}
	code, out, errs := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	for _, p := range []string{"round-robin", "hash", "optimizer", "SLO att.", "goodput rps", "ttft p50", "cache hit"} {
		if !strings.Contains(out, p) {
			t.Errorf("table lacks %q:\n%s", p, out)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Seed  uint64 `json:"seed"`
		Trace struct {
			SwingCopies int `json:"swing_copies"`
		}
		Policies []struct {
			Policy string `json:"policy"`
			SLO    *struct {
				TTFTMs *float64 `json:"ttft_ms"`
				TBOTMs *float64 `json:"tbot_ms"`
			} `json:"slo"`
			SLOAttainment      *float64 `json:"slo_attainment"`
			GoodputRPS         *float64 `json:"goodput_rps"`
			ServedFraction     *float64 `json:"served_fraction"`
			ShedFraction       *float64 `json:"shed_fraction"`
			Requests, Served   int
			Shed, Failed       int
			TTFT               map[string]float64 `json:"ttft_ms"`
			E2E                map[string]float64 `json:"e2e_ms"`
			CacheHitRatio      *float64           `json:"cache_hit_ratio"`
			MaxUtilization     *float64           `json:"max_utilization"`
			WeightChurn        *float64           `json:"weight_churn"`
			FollowupMovedRatio *float64           `json:"followup_moved_ratio"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Seed != 7 || len(res.Policies) != 3 || res.Trace.SwingCopies == 0 {
		t.Fatalf("json: %s", data)
	}
	for _, p := range res.Policies {
		if p.Served == 0 || p.Served+p.Shed+p.Failed != p.Requests || len(p.TTFT) != 4 || len(p.E2E) != 4 ||
			p.CacheHitRatio == nil || p.MaxUtilization == nil || p.WeightChurn == nil || p.FollowupMovedRatio == nil {
			t.Errorf("policy %+v", p)
		}
		if p.SLO == nil || p.SLO.TTFTMs == nil || p.SLO.TBOTMs == nil || p.SLOAttainment == nil || p.GoodputRPS == nil ||
			p.ServedFraction == nil || p.ShedFraction == nil || *p.SLO.TTFTMs != 10000 || *p.SLO.TBOTMs != 100 ||
			*p.ServedFraction != float64(p.Served)/float64(p.Requests) || *p.SLOAttainment > *p.ServedFraction {
			t.Errorf("goodput fields of %s: %s", p.Policy, data)
		}
		if p.Policy == "round-robin" && p.Failed == 0 {
			t.Errorf("round-robin lost nothing to the failure of west-1: %+v", p)
		}
	}
	html, err := os.ReadFile(filepath.Join(reportDir, "index.html"))
	if err != nil || strings.Count(string(html), "<svg") < 5 {
		t.Fatalf("report: %v, %d charts", err, strings.Count(string(html), "<svg"))
	}
}

// TestBacktestSeeds: --seeds 3 --jitter 1ms runs seeds 5, 6 and 7, prints
// each policy's mean and range, and writes every run and the summary;
// the summary's mean is the mean of the runs, and jitter makes the runs
// differ (a deterministic policy's TTFT moves).
func TestBacktestSeeds(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "seeds.json")
	code, out, errs := run(t, "backtest", "--quiet", "--fleet", btFleet, "--trace", btTrace, "--duration", "3m",
		"--policy", "least-loaded,hash", "--seed", "5", "--seeds", "3", "--jitter", "1ms", "--json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	for _, want := range []string{"3 runs (seeds 5-7", "least-loaded", "hash", "best in"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Seeds   []uint64 `json:"seeds"`
		Summary []struct {
			Policy        string                           `json:"policy"`
			SLOAttainment struct{ Mean, Min, Max float64 } `json:"slo_attainment"`
			Best          int                              `json:"best"`
		} `json:"summary"`
		Runs []struct {
			Seed     uint64 `json:"seed"`
			Policies []struct {
				Policy        string             `json:"policy"`
				SLOAttainment float64            `json:"slo_attainment"`
				TTFT          map[string]float64 `json:"ttft_ms"`
			} `json:"policies"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Seeds) != "[5 6 7]" || len(res.Runs) != 3 || len(res.Summary) != 2 || res.Runs[2].Seed != 7 {
		t.Fatalf("json: %.500s", data)
	}
	sum := 0.0
	for _, r := range res.Runs {
		sum += r.Policies[0].SLOAttainment
	}
	if s := res.Summary[0]; s.Policy != "least-loaded" || math.Abs(s.SLOAttainment.Mean-sum/3) > 1e-12 ||
		s.SLOAttainment.Min > s.SLOAttainment.Mean || s.SLOAttainment.Max < s.SLOAttainment.Mean {
		t.Errorf("summary %+v, want least-loaded with mean %v of the runs", s, sum/3)
	}
	if a, b := res.Runs[0].Policies[0].TTFT["mean"], res.Runs[1].Policies[0].TTFT["mean"]; a == b {
		t.Errorf("seeds 5 and 6 gave least-loaded the same mean TTFT %v: the jitter did nothing", a)
	}
}

func TestBacktestErrorsExit2(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"timestamp": 1, "input_length": 5, "output_length": 1}`+"\n{oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no trace", []string{"--fleet", btFleet}, "--trace are required"},
		{"missing trace", []string{"--fleet", btFleet, "--trace", "/nonexistent.csv"}, "no such file"},
		{"missing fleet", []string{"--fleet", "/nonexistent.yaml", "--trace", btTrace}, "no such file"},
		{"policy", []string{"--fleet", btFleet, "--trace", btTrace, "--policy", "hash,magic"}, `unknown policy "magic"`},
		{"bad trace", []string{"--fleet", btFleet, "--trace", bad}, "line 2"},
		{"format", []string{"--fleet", btFleet, "--trace", btTrace, "--format", "parquet"}, "unknown trace format"},
		{"swing", []string{"--fleet", btFleet, "--trace", btTrace, "--swing", "cluster=fe-east"}, "--swing"},
		{"fail engine", []string{"--fleet", btFleet, "--trace", btTrace, "--fail", "engine=nope,at=1s"}, `"nope"`},
		{"speed", []string{"--fleet", btFleet, "--trace", btTrace, "--speed", "-1"}, "speed"},
		{"smoothing", []string{"--fleet", btFleet, "--trace", btTrace, "--smooth-shed", "-5s"}, "--smooth-shed"},
		{"reuse smoothing", []string{"--fleet", btFleet, "--trace", btTrace, "--smooth-reuse", "-5s"}, "(reuse) must be >= 0"},
		{"calm smoothing", []string{"--fleet", btFleet, "--trace", btTrace, "--smooth-calm", "-5s"}, "(calm) must be >= 0"},
		{"jitter", []string{"--fleet", btFleet, "--trace", btTrace, "--jitter", "-1ms"}, "--jitter"},
		{"seeds without jitter", []string{"--fleet", btFleet, "--trace", btTrace, "--seeds", "3"}, "needs --jitter"},
		{"seeds with a report", []string{"--fleet", btFleet, "--trace", btTrace, "--seeds", "3", "--jitter", "1ms", "--report", "r"}, "--report"},
		{"seeds zero", []string{"--fleet", btFleet, "--trace", btTrace, "--seeds", "0"}, "--seeds 0"},
		{"local suffix on a simple policy", []string{"--fleet", btFleet, "--trace", btTrace, "--policy", "hash:local"}, `unknown policy "hash:local"`},
		{"requests path", []string{"--fleet", btFleet, "--trace", btTrace, "--policy", "hash", "--requests", "/nonexistent/dir/r.csv"}, "--requests"},
		{"negative slo", []string{"--fleet", sloFleet(t, "tbot_slo_ms: -5"), "--trace", btTrace}, "tbot_slo_ms -5"},
		{"NaN slo", []string{"--fleet", sloFleet(t, "ttft_slo_ms: .nan"), "--trace", btTrace}, "ttft_slo_ms NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := run(t, append([]string{"backtest", "--quiet"}, tc.args...)...)
			if code != 2 || !strings.Contains(errs, tc.msg) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q, want 2 and one line with %q", code, errs, tc.msg)
			}
		})
	}
}

// sloFleet writes the backtest fleet with line ("key: value") in place
// of its line for the same key, or added at the top.
func sloFleet(t *testing.T, line string) string {
	t.Helper()
	data, err := os.ReadFile(btFleet)
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ := strings.Cut(line, ":")
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, key+":") {
			out = append(out, l)
		}
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(line+"\n"+strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTraceConvert(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(
		`{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}`+"\n"+
			`{"timestamp": 20, "input_length": 600, "output_length": 7, "hash_ids": [0, 2]}`+"\n"+
			`{"timestamp": 900, "input_length": 1500, "output_length": 3, "hash_ids": [0, 1, 3]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.csv")
	code, _, errs := run(t, "trace", "convert", "--in", in, "--out", out, "--fleet", btFleet)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 || lines[0] != "timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks" {
		t.Fatalf("csv:\n%s", data)
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 6 || !strings.HasPrefix(f[1], "fe-") || f[2] == "" {
			t.Fatalf("line %q: want a cluster and a conversation id", l)
		}
	}
	// Converting the CSV again changes nothing.
	again := filepath.Join(dir, "again.csv")
	if code, _, errs := run(t, "trace", "convert", "--in", out, "--out", again); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if data2, _ := os.ReadFile(again); string(data2) != string(data) {
		t.Fatalf("second conversion differs:\n%s\n%s", data, data2)
	}
	if code, _, _ := run(t, "trace", "convert", "--in", in); code != 2 {
		t.Fatalf("missing --out: exit %d", code)
	}
	if code, _, _ := run(t, "trace", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}
