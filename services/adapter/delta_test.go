package adapter

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// bucketCounts counts values (ms) per histogram bucket (bounds in s).
func bucketCounts(bounds []float64, values []float64) map[float64]int {
	out := map[float64]int{}
	for _, v := range values {
		for _, b := range bounds {
			if v <= b*1000+1e-9 {
				out[b]++
				break
			}
		}
	}
	return out
}

func equalCounts(a, b map[float64]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Two consecutive scrapes of each fixture: the events the interval maps
// to. The fixtures' deltas were written from known observations (see
// testdata/README.md), so the answers are known.
func TestIntervalToEvents(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		kind                     Kind
		ok, aborted              int
		prompt, output, cached   uint32
		ttftBuckets, tbotBuckets map[float64]int // observations per bucket upper bound (s)
		tbotMeanMs               float64         // per-token TBOT when no per-request histogram
		running, waiting, ready  uint32
		kv                       float64
	}{
		{name: "vllm-v1", kind: KindVLLM, ok: 38, aborted: 2, prompt: 2000, output: 180, cached: 1500,
			ttftBuckets: map[float64]int{0.25: 10, 0.5: 20, 0.75: 6, 2.5: 2},
			tbotBuckets: map[float64]int{0.05: 30, 0.075: 8},
			running:     20, waiting: 4, ready: 2, kv: 0.45},
		{name: "vllm-v0", kind: KindVLLM, ok: 12, prompt: 1200, output: 150, cached: 504, // 0.42 block hit rate
			ttftBuckets: map[float64]int{0.08: 4, 0.25: 6, 0.5: 2},
			tbotMeanMs:  (1500*30 + 288*55) / 1788.0,
			running:     6, waiting: 0, ready: 1, kv: 0.27},
		{name: "sglang", kind: KindSGLang, ok: 24, aborted: 1, prompt: 3000, output: 250, cached: 2000,
			ttftBuckets: map[float64]int{0.2: 10, 0.4: 10, 1: 4},
			tbotMeanMs:  (5000*12 + 976*18) / 5976.0,
			running:     14, waiting: 2, ready: 1, kv: 0.61},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := parseFile(t, tc.name+"-a.prom", tc.kind)
			b := parseFile(t, tc.name+"-b.prom", tc.kind)
			comps, dropped := Completions("eng-1", 42, Diff(a, b), 1000)
			if dropped != 0 || len(comps) != tc.ok+tc.aborted {
				t.Fatalf("%d events (%d dropped), want %d + %d aborted", len(comps), dropped, tc.ok, tc.aborted)
			}
			var ttft, tbot []float64
			for i, c := range comps {
				if err := c.Validate(); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if c.Engine != "eng-1" || c.TimeUnixNano != 42 || c.ConversationID != "" || c.Cluster != "" {
					t.Fatalf("event %d: %+v", i, c)
				}
				if i >= tc.ok {
					if c.Error != ErrorAborted || c.PromptTokens != 0 {
						t.Errorf("aborted event %d: %+v", i, c)
					}
					continue
				}
				if c.Error != "" || c.PromptTokens != tc.prompt || c.OutputTokens != tc.output || c.CachedPromptTokens != tc.cached {
					t.Errorf("event %d: prompt %d output %d cached %d error %q", i, c.PromptTokens, c.OutputTokens, c.CachedPromptTokens, c.Error)
				}
				if tc.tbotMeanMs > 0 && math.Abs(c.TBOTMs-tc.tbotMeanMs) > 1e-9 {
					t.Errorf("event %d: TBOT %v ms, want the per-token mean %v", i, c.TBOTMs, tc.tbotMeanMs)
				}
				ttft, tbot = append(ttft, c.TTFTMs), append(tbot, c.TBOTMs)
			}
			if got := bucketCounts(b.TTFT.Bounds, ttft); !equalCounts(got, tc.ttftBuckets) {
				t.Errorf("TTFT per bucket %v, want %v", got, tc.ttftBuckets)
			}
			if tc.tbotBuckets != nil {
				if got := bucketCounts(b.TBOT.Bounds, tbot); !equalCounts(got, tc.tbotBuckets) {
					t.Errorf("TBOT per bucket %v, want %v", got, tc.tbotBuckets)
				}
			}
			st := Status("eng-1", 42, b)
			if err := st.Validate(); err != nil {
				t.Fatal(err)
			}
			if st.Health != schemas.HealthHealthy || st.Running != tc.running || st.Waiting != tc.waiting ||
				st.ReadyReplicas != tc.ready || st.TotalReplicas != tc.ready || math.Abs(st.KVCacheUtilization-tc.kv) > 1e-9 {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// An engine that restarted between scrapes has smaller counters: their
// growth is their new value.
func TestCounterResetCountsFromZero(t *testing.T) {
	a := parseFile(t, "vllm-v0-a.prom", KindVLLM)
	b := parseFile(t, "vllm-v0-b.prom", KindVLLM)
	iv := Diff(b, a) // backwards: every counter shrank
	if iv.Finished != 50 || iv.PromptTokens != 60000 || iv.TTFT.Count != 50 {
		t.Fatalf("reset interval: finished %v prompt %v ttft %v", iv.Finished, iv.PromptTokens, iv.TTFT.Count)
	}
	// No change, no events.
	if comps, _ := Completions("e", 1, Diff(b, b), 100); len(comps) != 0 {
		t.Fatalf("%d events from an idle interval", len(comps))
	}
}

func TestCompletionsLimit(t *testing.T) {
	a := parseFile(t, "vllm-v1-a.prom", KindVLLM)
	b := parseFile(t, "vllm-v1-b.prom", KindVLLM)
	comps, dropped := Completions("e", 1, Diff(a, b), 10)
	if len(comps) != 10 || dropped != 30 {
		t.Fatalf("%d events, %d dropped; want 10 and 30", len(comps), dropped)
	}
}

func TestQuantile(t *testing.T) {
	// 2 observations in (0, 1], none in (1, 2], 4 in (2, 4], 2 above 4.
	h := Histogram{Bounds: []float64{1, 2, 4}, Counts: []float64{2, 2, 6}, Count: 8, Present: true}
	for _, tc := range []struct{ q, want float64 }{
		{0, 0}, {0.125, 0.5}, {0.25, 1}, {0.5, 3}, {0.75, 4}, {0.9, 4}, {1, 4},
	} {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if !math.IsNaN((Histogram{}).Quantile(0.5)) {
		t.Error("empty histogram has a quantile")
	}
}

func TestUnreachableStatus(t *testing.T) {
	st := Unreachable("e", 9, 2)
	if err := st.Validate(); err != nil || st.Health != schemas.HealthUnhealthy || st.ReadyReplicas != 0 || st.TotalReplicas != 2 {
		t.Fatalf("%+v %v", st, err)
	}
}

// BenchmarkScrapeToEvents is the adapter's work per scrape of a
// data-parallel vLLM: parse the 38 kB body, diff, synthesize 40 events.
func BenchmarkScrapeToEvents(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "vllm-v1-b.prom"))
	if err != nil {
		b.Fatal(err)
	}
	prevBody, err := os.ReadFile(filepath.Join("testdata", "vllm-v1-a.prom"))
	if err != nil {
		b.Fatal(err)
	}
	prev, err := Parse(bytes.NewReader(prevBody), KindVLLM)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := Parse(bytes.NewReader(body), KindVLLM)
		if err != nil {
			b.Fatal(err)
		}
		if comps, _ := Completions("e", 1, Diff(prev, s), 1000); len(comps) != 40 {
			b.Fatalf("%d events", len(comps))
		}
	}
}
