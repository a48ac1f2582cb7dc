package adapter

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func parseFile(t *testing.T, name string, kind Kind) Sample {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Parse(f, kind)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*max(1, math.Abs(b)) }

// The gauges and counters of the second scrape of each fixture, summed
// over series (vLLM V1 runs two data-parallel engine cores here).
func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file                           string
		kind                           Kind
		running, waiting, kv, hitRate  float64
		ranks                          int
		finished, aborted              float64
		prompt, output, cached         float64
		cachedPresent, perRequestTBOT  bool
		ttftCount, ttftSum, tbotCount  float64
		ttftBuckets, tbotBucketsFinite int
	}{
		{"vllm-v1-b.prom", KindVLLM, 20, 4, 0.45, -1, 2, 273, 5, 566000, 51075, 407000, true, true,
			121 + 20 + 117 + 18, 30.3 + 9.2 + 27.15 + 7.1, 120 + 20 + 115 + 18, 22, 19},
		{"vllm-v0-b.prom", KindVLLM, 6, 0, 0.27, 0.42, 1, 62, 0, 74400, 9300, 0, false, false,
			62, 0.05*10 + 0.07*15 + 0.2*20 + 0.4*5 + 4*0.08 + 6*0.2 + 2*0.4, 7450 + 1788, 16, 13},
		{"sglang-b.prom", KindSGLang, 14, 2, 0.61, 0.66, 1, 30236, 18, // finished counts the aborted too
			8200902, 7563572, 5150400, true, false,
			30211 + 24, 0, 7527361 + 5976, 18, 23},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s := parseFile(t, tc.file, tc.kind)
			if s.Running != tc.running || s.Waiting != tc.waiting || !near(s.KVUsage, tc.kv) || !near(s.HitRate, tc.hitRate) || s.Ranks != tc.ranks {
				t.Errorf("gauges: running %v waiting %v kv %v hit rate %v ranks %d", s.Running, s.Waiting, s.KVUsage, s.HitRate, s.Ranks)
			}
			if s.Finished.Value != tc.finished || s.Aborted.Value != tc.aborted {
				t.Errorf("requests: finished %v aborted %v", s.Finished.Value, s.Aborted.Value)
			}
			if s.PromptTokens.Value != tc.prompt || s.OutputTokens.Value != tc.output || s.CachedTokens.Value != tc.cached ||
				s.CachedTokens.Present != tc.cachedPresent {
				t.Errorf("tokens: prompt %v output %v cached %v (%v)", s.PromptTokens.Value, s.OutputTokens.Value, s.CachedTokens.Value, s.CachedTokens.Present)
			}
			if s.TTFT.Count != tc.ttftCount || (tc.ttftSum != 0 && !near(s.TTFT.Sum, tc.ttftSum)) || len(s.TTFT.Bounds) != tc.ttftBuckets {
				t.Errorf("TTFT: count %v sum %v, %d buckets", s.TTFT.Count, s.TTFT.Sum, len(s.TTFT.Bounds))
			}
			if s.PerRequestTBOT != tc.perRequestTBOT || s.TBOT.Count != tc.tbotCount || len(s.TBOT.Bounds) != tc.tbotBucketsFinite {
				t.Errorf("TBOT: per request %v count %v, %d buckets", s.PerRequestTBOT, s.TBOT.Count, len(s.TBOT.Bounds))
			}
		})
	}
}

func TestParseSkipsOtherRanksAndKeepsDataParallelCores(t *testing.T) {
	text := `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0",pp_rank="0"} 5
sglang:num_running_reqs{model_name="m",tp_rank="1",pp_rank="0"} 5
sglang:num_running_reqs{model_name="m",tp_rank="0",pp_rank="1"} 5
`
	s, err := Parse(strings.NewReader(text), KindSGLang)
	if err != nil || s.Running != 5 || s.KVUsage != -1 || s.TTFT.Present || s.Finished.Present {
		t.Fatalf("got %+v, %v", s, err)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, text := range []string{"vllm:num_requests_running{", "# TYPE x histogram\nx_bucket{le=\"a\"} 1\n", "x 1 2 3 4\n"} {
		_, err := Parse(strings.NewReader(text), KindVLLM)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: err %v, want a ParseError", text, err)
		}
	}
	if _, err := Parse(strings.NewReader(""), "tgi"); err == nil {
		t.Error("unknown kind accepted")
	}
	// An idle vLLM reports NaN for some gauges; they read as 0.
	s, err := Parse(strings.NewReader("vllm:kv_cache_usage_perc{engine=\"0\"} NaN\n"), KindVLLM)
	if err != nil || s.KVUsage != 0 {
		t.Fatalf("NaN gauge: %v %v", s.KVUsage, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"vllm-v1-a.prom", "vllm-v0-a.prom", "sglang-a.prom",
		"captures/vllm-0.10.0-prodstack617.prom", "captures/vllm-design-doc.prom", "captures/sglang-dp-attention-aibrix1614.prom"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 3000)])
	}
	f.Add([]byte("# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 5\nvllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\nvllm:time_to_first_token_seconds_count 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range []Kind{KindVLLM, KindSGLang} {
			s, err := Parse(strings.NewReader(string(b)), kind)
			if err != nil {
				continue
			}
			// Whatever parses must map to valid events.
			st := Status("e", 1, s)
			if err := st.Validate(); err != nil {
				t.Fatalf("status from %q: %v", b, err)
			}
			comps, _ := Completions("e", 1, Diff(Sample{}, s), 50)
			for i := range comps {
				if err := comps[i].Validate(); err != nil {
					t.Fatalf("completion %d from %q: %v", i, b, err)
				}
			}
		}
	})
}
