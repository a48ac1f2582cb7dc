package adapter

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// Real /metrics captures (testdata/captures, SOURCE.md there): the status
// each one gives. Every expected number was read by hand from the file;
// the comment on each case says which line. "missing" lists the load
// families the capture lacks (excerpts cut by their sources), which read
// as 0; a capture with none of them is not usable (HasLoad false) and
// the scraper reports the engine unreachable rather than idle.
func TestRealCaptures(t *testing.T) {
	for _, tc := range []struct {
		file             string
		kind             Kind
		running, waiting float64
		kv               float64 // the status's KVCacheUtilization
		cores            uint32
		missing          []string
		usable           bool
	}{
		// vLLM 0.8 V1: line 16 num_requests_running 0.0, line 19
		// num_requests_waiting 0.0, line 22 gpu_cache_usage_perc 0.0 (the
		// pre-0.9.2 name, read: kv_cache is not missing); no engine label.
		{file: "vllm-0.8-v1-prodstack318.prom", kind: KindVLLM, cores: 1, usable: true},
		// vLLM 0.10.0: line 13 kv_cache_usage_perc{engine="0"}
		// 9.75010481363281e-06; one engine core ("0"); the excerpt has no
		// running or waiting family.
		{file: "vllm-0.10.0-prodstack617.prom", kind: KindVLLM, kv: 9.75010481363281e-06, cores: 1,
			missing: []string{"running", "waiting"}, usable: true},
		// vLLM 0.10.0, later part: only request_queue_time buckets.
		{file: "vllm-0.10.0-prodstack617-queue-time.prom", kind: KindVLLM, cores: 1,
			missing: []string{"running", "waiting", "kv_cache"}},
		// vLLM design doc: line 5 num_requests_running 8.0; waiting and
		// KV elided ("# ...").
		{file: "vllm-design-doc.prom", kind: KindVLLM, running: 8, cores: 1,
			missing: []string{"waiting", "kv_cache"}, usable: true},
		// SGLang docs: line 107 num_running_reqs 162.0, line 116
		// num_queue_reqs 2826.0, line 10 token_usage 0.28.
		{file: "sglang-docs.prom", kind: KindSGLang, running: 162, waiting: 2826, kv: 0.28, cores: 1, usable: true},
		// SGLang 0.5.1: line 4 num_running_reqs{tp_rank="0"} 1.0, line 10
		// token_usage 0.0; no num_queue_reqs in the excerpt.
		{file: "sglang-0.5.1-issue13485.prom", kind: KindSGLang, running: 1, cores: 1,
			missing: []string{"waiting"}, usable: true},
		// SGLang DP attention: only num_retracted_reqs and
		// num_paused_reqs (see TestRealCaptureDataParallelRanks).
		{file: "sglang-dp-attention-aibrix1614.prom", kind: KindSGLang, cores: 1,
			missing: []string{"running", "waiting", "kv_cache"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s := parseFile(t, "captures/"+tc.file, tc.kind)
			if !slices.Equal(s.Missing, tc.missing) || s.HasLoad() != tc.usable {
				t.Fatalf("missing %v (usable %v), want %v (%v)", s.Missing, s.HasLoad(), tc.missing, tc.usable)
			}
			st := Status("e", 1, s)
			if err := st.Validate(); err != nil {
				t.Fatal(err)
			}
			if float64(st.Running) != tc.running || float64(st.Waiting) != tc.waiting ||
				math.Abs(st.KVCacheUtilization-tc.kv) > 1e-15 || st.ReadyReplicas != tc.cores {
				t.Errorf("status running %d waiting %d KV %v cores %d; want %v %v %v %d",
					st.Running, st.Waiting, st.KVCacheUtilization, st.ReadyReplicas, tc.running, tc.waiting, tc.kv, tc.cores)
			}
		})
	}
}

// The counters of the real captures: vLLM's design-doc example counts
// 1 stop + 131 length + 0 abort requests (lines 13-15) and 140 TTFT
// observations (line 27); SGLang's docs example 11008 (line 38) and a
// 0.0075 hit rate (line 13). A first scrape turns into that many
// completions only against an empty previous sample, never in the
// running adapter (it needs two scrapes).
func TestRealCaptureCounters(t *testing.T) {
	v := parseFile(t, "captures/vllm-design-doc.prom", KindVLLM)
	if v.Finished.Value != 132 || v.Aborted.Value != 0 || !v.Aborted.Present || v.TTFT.Count != 140 || len(v.TTFT.Bounds) != 8 {
		t.Errorf("vLLM: finished %v aborted %v TTFT count %v over %d buckets", v.Finished.Value, v.Aborted.Value, v.TTFT.Count, len(v.TTFT.Bounds))
	}
	g := parseFile(t, "captures/sglang-docs.prom", KindSGLang)
	if g.TTFT.Count != 11008 || g.Finished.Present || math.Abs(g.HitRate-0.007507552643049313) > 1e-18 {
		t.Errorf("SGLang: TTFT count %v, finished present %v, hit rate %v", g.TTFT.Count, g.Finished.Present, g.HitRate)
	}
	// The same scrape twice is an idle interval.
	if iv := Diff(v, v); iv.Finished != 0 || iv.TTFT.Count != 0 {
		t.Errorf("idle interval: %+v", iv)
	}
}

// SGLang with DP attention labels one series per data-parallel rank,
// with tp_rank = the rank's first TP rank (the real capture has
// dp_rank 0..3 and 5 for num_paused_reqs, each with tp_rank equal to
// dp_rank and its own pid). Each rank is a distinct engine core to sum,
// not a copy to drop as a non-zero tp_rank would suggest.
func TestRealCaptureDataParallelRanks(t *testing.T) {
	f := parseFamilies(t, "captures/sglang-dp-attention-aibrix1614.prom")
	if _, ss := f.series("sglang:num_paused_reqs"); len(ss) != 5 {
		t.Errorf("num_paused_reqs: %d series kept, want 5 (one per dp_rank)", len(ss))
	}
	if n := f.cores([]string{"sglang:num_paused_reqs"}); n != 5 {
		t.Errorf("num_paused_reqs: %d cores, want 5", n)
	}
	if n := f.cores([]string{"sglang:num_retracted_reqs"}, []string{"sglang:num_paused_reqs"}); n != 8 {
		t.Errorf("both families: %d cores, want 8 (dp_rank 0-7)", n)
	}
}

// Copies of one core's numbers (every TP rank reporting, as with
// --enable-metrics-for-all-schedulers) count once, the lowest rank's,
// while data-parallel ranks and vLLM engines add up; KV use is their
// mean.
func TestRanksSummedCopiesDropped(t *testing.T) {
	for _, tc := range []struct {
		name, text           string
		kind                 Kind
		running, waiting, kv float64
		cores                int
	}{
		{name: "sglang dp ranks with TP copies", kind: KindSGLang, running: 10, waiting: 3, kv: 0.5, cores: 2, text: `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",model_name="m",pid="10",pp_rank="0",tp_rank="0"} 4
sglang:num_running_reqs{dp_rank="0",model_name="m",pid="11",pp_rank="0",tp_rank="1"} 4
sglang:num_running_reqs{dp_rank="1",model_name="m",pid="12",pp_rank="0",tp_rank="2"} 6
sglang:num_running_reqs{dp_rank="1",model_name="m",pid="13",pp_rank="0",tp_rank="3"} 6
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",model_name="m",pid="10",pp_rank="0",tp_rank="0"} 1
sglang:num_queue_reqs{dp_rank="1",model_name="m",pid="12",pp_rank="0",tp_rank="2"} 2
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",model_name="m",pid="10",pp_rank="0",tp_rank="0"} 0.4
sglang:token_usage{dp_rank="1",model_name="m",pid="13",pp_rank="0",tp_rank="3"} 0.9
sglang:token_usage{dp_rank="1",model_name="m",pid="12",pp_rank="0",tp_rank="2"} 0.6
`},
		{name: "vllm data-parallel engines", kind: KindVLLM, running: 7, waiting: 1, kv: 0.3, cores: 3, text: `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1
vllm:num_requests_running{engine="1",model_name="m"} 2
vllm:num_requests_running{engine="2",model_name="m"} 4
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="2",model_name="m"} 1
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.1
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.3
vllm:kv_cache_usage_perc{engine="2",model_name="m"} 0.5
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(strings.NewReader(tc.text), tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			if s.Running != tc.running || s.Waiting != tc.waiting || math.Abs(s.KVUsage-tc.kv) > 1e-12 || s.Ranks != tc.cores {
				t.Errorf("running %v waiting %v KV %v cores %d", s.Running, s.Waiting, s.KVUsage, s.Ranks)
			}
			st := Status("e", 1, s)
			if st.ReadyReplicas != uint32(tc.cores) || st.TotalReplicas != uint32(tc.cores) {
				t.Errorf("status replicas %d/%d", st.ReadyReplicas, st.TotalReplicas)
			}
		})
	}
}

func parseFamilies(t *testing.T, name string) families {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := readFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A body without any load family (here a real capture that has none) is
// a failed scrape: the engine is reported unhealthy, not idle.
func TestNoLoadMetricsIsUnreachable(t *testing.T) {
	_, srv := newFakeEngine(t, "captures/sglang-dp-attention-aibrix1614.prom", "captures/sglang-docs.prom")
	var got collected
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = nil
	cfg.Targets = []Target{{Engine: "e", URL: srv.URL + "/metrics", Kind: KindSGLang}}
	cfg.OnEvent = got.add
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &scraper{a: a, t: cfg.Targets[0]}
	s.once(context.Background(), time.Unix(1, 0))
	s.once(context.Background(), time.Unix(6, 0))
	if len(got.events) != 2 || got.events[0].Status.Health != schemas.HealthUnhealthy ||
		got.events[1].Status.Health != schemas.HealthHealthy || got.events[1].Status.Running != 162 {
		t.Fatalf("events %+v", got.events)
	}
}
