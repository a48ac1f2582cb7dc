package adapter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

func mustParse(t *testing.T, text string, kind Kind) Sample {
	t.Helper()
	s, err := Parse(strings.NewReader(text), kind)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// vllmDP is a two-engine vLLM V1 scrape: each engine's finished requests,
// its counter's creation time, and the TTFT histogram (all under 0.1 s).
func vllmDP(start float64, fin0, fin1, created0, created1 float64) string {
	return fmt.Sprintf(`# TYPE process_start_time_seconds gauge
process_start_time_seconds %g
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1
vllm:num_requests_running{engine="1",model_name="m"} 1
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} %g
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} %g
# TYPE vllm:request_success_created gauge
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} %g
vllm:request_success_created{engine="1",finished_reason="stop",model_name="m"} %g
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} %g
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} %g
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} %g
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} %g
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} %g
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} %g
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} %g
vllm:time_to_first_token_seconds_created{engine="1",model_name="m"} %g
`, start, fin0, fin1, created0, created1, fin0, fin0, fin0, fin1, fin1, fin1, created0, created1)
}

// Counter resets: growth is counted series by series, so no interval is
// negative and no restart turns lifetime totals into a burst.
func TestCounterResets(t *testing.T) {
	const t0, t1 = 1.7e9, 1.8e9
	for _, tc := range []struct {
		name      string
		prev, cur string
		finished  float64 // growth
		restarted bool
	}{
		// Plain growth: 10 + 5.
		{"growth", vllmDP(t0, 1000, 800, t0, t0), vllmDP(t0, 1010, 805, t0, t0), 15, false},
		// Engine core 1 restarted (800 -> 5): 10 + 5. The summed counter
		// went 1800 -> 1015; taking its new value would be 1015 completions.
		{"one core restarted", vllmDP(t0, 1000, 800, t0, t0), vllmDP(t0, 1010, 5, t0, t1), 15, false},
		// Core 1 came back with a larger count than before (a long gap):
		// its _created time changed, so its growth is its new value.
		{"created changed", vllmDP(t0, 1000, 800, t0, t0), vllmDP(t0, 1010, 900, t0, t1), 910, false},
		// The whole server restarted (process start time changed): every
		// counter's growth is its new value.
		{"process restarted", vllmDP(t0, 1000, 800, t0, t0), vllmDP(t1, 3, 4, t0, t0), 7, true},
		// Core 1 disappeared: nothing from it, nothing negative.
		{"core gone", vllmDP(t0, 1000, 800, t0, t0), strings.ReplaceAll(vllmDP(t0, 1010, 0, t0, t0), `engine="1"`, `engine="9",gone="1"`), 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv := Diff(mustParse(t, tc.prev, KindVLLM), mustParse(t, tc.cur, KindVLLM))
			// Engine 9 is a new series: its 0 adds nothing.
			if iv.Finished != tc.finished || iv.TTFT.Count != tc.finished || iv.Restarted != tc.restarted {
				t.Errorf("finished %v, TTFT %v, restarted %v; want %v, %v", iv.Finished, iv.TTFT.Count, iv.Restarted, tc.finished, tc.restarted)
			}
			if iv.TTFT.Counts[0] != iv.TTFT.Count {
				t.Errorf("TTFT buckets %v of %v", iv.TTFT.Counts, iv.TTFT.Count)
			}
		})
	}
}

// SGLang's data-parallel ranks carry a pid: a rank whose pid changed is
// a new process, its counters new.
func TestCounterResetByPid(t *testing.T) {
	scrape := func(pid int, total float64) string {
		return fmt.Sprintf(`# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",pid="%d",tp_rank="0"} 1
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{dp_rank="0",pid="%d",tp_rank="0"} %g
`, pid, pid, total)
	}
	a, b, c := mustParse(t, scrape(910, 500), KindSGLang), mustParse(t, scrape(910, 520), KindSGLang), mustParse(t, scrape(4242, 530), KindSGLang)
	if g := Diff(a, b).Finished; g != 20 {
		t.Errorf("same pid: %v, want 20", g)
	}
	if g := Diff(b, c).Finished; g != 530 {
		t.Errorf("new pid: %v, want 530", g)
	}
}

// The real vLLM 0.10.0 capture's prefix-cache counter with its _created
// series (line 7: hits 0.0 created 1.7537953269353123e+09): a later
// scrape of the same process grows it; a restarted process (a new
// created time) counts from its new value even though it is larger.
func TestRealCaptureCreatedSeries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "captures", "vllm-0.10.0-prodstack617.prom"))
	if err != nil {
		t.Fatal(err)
	}
	orig := string(b)
	hits := `vllm:gpu_prefix_cache_hits_total{engine="0",model_name="zai-org/GLM-4.5"} `
	created := `vllm:gpu_prefix_cache_hits_created{engine="0",model_name="zai-org/GLM-4.5"} 1.7537953269353123e+09`
	if !strings.Contains(orig, hits+"0.0") || !strings.Contains(orig, created) {
		t.Fatal("capture changed")
	}
	prev := mustParse(t, orig, KindVLLM)
	later := mustParse(t, strings.Replace(orig, hits+"0.0", hits+"640.0", 1), KindVLLM)
	restarted := mustParse(t, strings.Replace(strings.Replace(orig, hits+"0.0", hits+"96.0", 1),
		created, strings.Replace(created, "1.7537953269353123e+09", "1.7537999e+09", 1), 1), KindVLLM)
	if g := Diff(prev, later).CachedTokens; g != 640 {
		t.Errorf("same process: %v cached tokens, want 640", g)
	}
	if g := Diff(later, restarted).CachedTokens; g != 96 {
		t.Errorf("restarted: %v cached tokens, want 96 (not 0 and not -544)", g)
	}
}

// A long outage: when the next good scrape comes more than
// MaxGapIntervals intervals after the last, its growth becomes the
// baseline, counted, instead of a burst of completions at one instant.
// A short gap (one failed scrape) is accounted normally.
func TestLongGapNoBurst(t *testing.T) {
	fake, srv := newFakeEngine(t, "vllm-v1-a.prom", "vllm-v1-b.prom")
	var got collected
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = nil
	cfg.Targets = []Target{{Engine: "e", URL: srv.URL + "/metrics", Kind: KindVLLM}}
	cfg.OnEvent = got.add
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &scraper{a: a, t: cfg.Targets[0]}
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	s.once(ctx, t0) // a
	fake.failing.Store(true)
	s.once(ctx, t0.Add(cfg.Interval))
	fake.failing.Store(false)
	s.once(ctx, t0.Add(time.Duration(cfg.MaxGapIntervals+1)*cfg.Interval)) // b, after a long gap
	if n := countKind(got.events, schemas.KindCompletion, 0); n != 0 {
		t.Fatalf("%d completions after a long gap, want 0", n)
	}
	// Served a again then b, within one failed scrape of each other.
	fake.served.Store(0)
	s.once(ctx, t0.Add(100*cfg.Interval))
	fake.failing.Store(true)
	s.once(ctx, t0.Add(101*cfg.Interval))
	fake.failing.Store(false)
	s.once(ctx, t0.Add(102*cfg.Interval))
	if n := countKind(got.events, schemas.KindCompletion, 0); n != 40 {
		t.Fatalf("%d completions after a short gap, want the 38 + 2 of the interval", n)
	}
}
