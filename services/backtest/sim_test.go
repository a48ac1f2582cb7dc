package backtest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// twoRegionFleet has clusters fe-a (region a) and fe-b (region b) and
// four identical engines, two per region; 1 ms within a region, 50 ms
// across. Decode steps take 20 ms whatever the batch.
const twoRegionFleet = `
max_utilization: 0.95
block_tokens: 512
mean_output_tokens: 50
network_ms:
  a: {a: 1, b: 50}
  b: {b: 1}
clusters:
  - {name: fe-a, region: a, demand_share: 0.5}
  - {name: fe-b, region: b, demand_share: 0.5}
engines:
  - {name: a0, region: a, sku: test, prefill_tokens_per_s: 10000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 16, kv_cache_tokens: 200000}
  - {name: a1, region: a, sku: test, prefill_tokens_per_s: 10000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 16, kv_cache_tokens: 200000}
  - {name: b0, region: b, sku: test, prefill_tokens_per_s: 10000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 16, kv_cache_tokens: 200000}
  - {name: b1, region: b, sku: test, prefill_tokens_per_s: 10000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 16, kv_cache_tokens: 200000}
`

func parseFleet(t testing.TB, yaml string) *schemas.Fleet {
	t.Helper()
	f, err := schemas.ParseFleet([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// oneEngineFleet keeps only engine a0 and cluster fe-a.
func oneEngineFleet(t testing.TB) *schemas.Fleet {
	f := parseFleet(t, twoRegionFleet)
	f.Clusters, f.Engines = f.Clusters[:1], f.Engines[:1]
	return f
}

// synthetic returns convs conversations of turns turns, alternating
// clusters: every conversation's first turn, one every gap, then every
// second turn, and so on; prompts grow by one 512-token block a turn.
func synthetic(convs, turns int, gap time.Duration, output int) *Trace {
	tr := &Trace{Format: FormatCSV}
	for c := range convs {
		var blocks []uint64
		for k := range turns {
			blocks = append(blocks, uint64(c*1000+k))
			tr.Requests = append(tr.Requests, Request{
				ArrivalNs:    int64(k*convs+c) * int64(gap),
				Cluster:      []string{"fe-a", "fe-b"}[c%2],
				Conversation: fmt.Sprintf("c%d", c),
				InputTokens:  512 * len(blocks), OutputTokens: output,
				Blocks: append([]uint64(nil), blocks...),
			})
		}
	}
	normalise(tr)
	return tr
}

func run(t testing.TB, f *schemas.Fleet, tr *Trace, mutate func(*Config)) *Result {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Fleet = f
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestKnownAnswer(t *testing.T) {
	// Two turns of one conversation on one idle engine (chunked prefill,
	// the default: a prompt's step costs the 20 ms decode base plus its
	// tokens). Turn 1: 1024 prompt tokens prefill in 20 + 102.4 ms, 4
	// more tokens take 4 decode steps of 20 ms. Turn 2 (at 1 s) finds its
	// first two blocks cached: 512 tokens to prefill, 20 + 51.2 ms. Every
	// latency gains the 1 ms network.
	tr, err := ReadTrace(strings.NewReader("timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks\n"+
		"0,fe-a,c1,1024,5,1 2\n1000,fe-a,c1,1536,1,1 2 3\n"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, oneEngineFleet(t), tr, func(c *Config) { c.Policies = Policies })
	for _, p := range res.Policies {
		want := PolicyResult{Served: 2, CacheHitRatio: 1024.0 / 2560}
		if p.Served != want.Served || math.Abs(p.CacheHitRatio-want.CacheHitRatio) > 1e-12 ||
			!close(p.TTFTMs.P50, 72.2) || !close(p.TTFTMs.P99, 123.4) || !close(p.E2EMs.P99, 203.4) ||
			!close(p.TTFTMs.Mean, (123.4+72.2)/2) || p.Followups != 1 || p.FollowupMovedRatio != 0 {
			t.Errorf("%s: %+v", p.Policy, p)
		}
	}
}

func close(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestStaticPolicies(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	// 101 conversations per cluster: round-robin over 4 engines sends each
	// turn one engine further than the conversation's previous one.
	tr := synthetic(202, 3, 50*time.Millisecond, 20)
	res := run(t, f, tr, func(c *Config) {
		c.Policies = []string{PolicyRoundRobin, PolicyRandom, PolicyNearest, PolicyLeastLoaded, PolicyHash}
	})
	by := map[string]PolicyResult{}
	for _, p := range res.Policies {
		by[p.Policy] = p
		if p.Served != 606 || p.Shed+p.Failed != 0 || p.WeightUpdates != 0 {
			t.Errorf("%s: served %d shed %d failed %d updates %d", p.Policy, p.Served, p.Shed, p.Failed, p.WeightUpdates)
		}
	}
	for _, c := range by[PolicyNearest].Clusters {
		if c.RemoteRatio != 0 {
			t.Errorf("nearest sent %.2f of %s remote", c.RemoteRatio, c.Name)
		}
	}
	for _, c := range by[PolicyRoundRobin].Clusters {
		if math.Abs(c.RemoteRatio-0.5) > 1.0/303 { // 303 requests over 4 engines
			t.Errorf("round-robin sent %.3f of %s remote, want 0.5", c.RemoteRatio, c.Name)
		}
	}
	for _, e := range by[PolicyRoundRobin].Engines {
		if e.Requests < 150 || e.Requests > 152 { // 76 or 75 from each cluster
			t.Errorf("round-robin gave %s %d requests, want 150 to 152", e.Name, e.Requests)
		}
	}
	if h := by[PolicyHash]; h.FollowupMovedRatio != 0 || h.Followups != 404 || !(h.CacheHitRatio > by[PolicyRoundRobin].CacheHitRatio) {
		t.Errorf("hash: moved %.3f of %d follow-ups, cache %.3f vs round-robin %.3f",
			h.FollowupMovedRatio, h.Followups, h.CacheHitRatio, by[PolicyRoundRobin].CacheHitRatio)
	}
}

func TestLeastLoadedSpreadsABurst(t *testing.T) {
	tr := &Trace{Format: FormatCSV}
	for i := range 40 {
		tr.Requests = append(tr.Requests, Request{Cluster: "fe-a", Conversation: fmt.Sprint(i), InputTokens: 100, OutputTokens: 100})
	}
	res := run(t, parseFleet(t, twoRegionFleet), tr, func(c *Config) { c.Policies = []string{PolicyLeastLoaded} })
	for _, e := range res.Policies[0].Engines {
		if e.Requests != 10 {
			t.Errorf("%s got %d of a burst of 40, want 10", e.Name, e.Requests)
		}
	}
}

func TestSeed(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	counts := func(seed uint64) string {
		res := run(t, f, synthetic(100, 1, 10*time.Millisecond, 5), func(c *Config) { c.Policies, c.Seed = []string{PolicyRandom}, seed })
		return fmt.Sprint(res.Policies[0].Engines)
	}
	if a, b := counts(1), counts(1); a != b {
		t.Fatalf("seed 1 twice: %s vs %s", a, b)
	}
	if a, b := counts(1), counts(2); a == b {
		t.Fatalf("seeds 1 and 2 routed alike: %s", a)
	}
}

func TestSpeedAndDuration(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	tr := synthetic(100, 1, 100*time.Millisecond, 5) // arrivals over 9.9 s
	b, err := New(func() Config { c := DefaultConfig(); c.Fleet, c.Speed, c.Duration = f, 2, 3*time.Second; return c }(), tr)
	if err != nil {
		t.Fatal(err)
	}
	// At speed 2 the gaps are 50 ms; 3 s keeps arrivals at 0..2.95 s.
	if s := b.Summary(); s.Requests != 60 || !close(s.DurationS, 2.95) {
		t.Fatalf("summary %+v, want 60 requests over 2.95 s", s)
	}
}
