package backtest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ilb-router/ilb/services/backtest/peer"
)

// Every peer policy, and its :local variant, serves a light synthetic
// load in full, and gives the same result twice.
func TestPeerPoliciesServeAll(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	tr := synthetic(40, 4, 50*time.Millisecond, 20)
	var names []string
	for _, n := range peer.Names() {
		names = append(names, n, n+peer.LocalSuffix)
	}
	res := run(t, f, tr, func(c *Config) { c.Policies, c.Parallel = names, 2 })
	for _, p := range res.Policies {
		if p.Served != p.Requests || p.Shed != 0 || p.Failed != 0 {
			t.Errorf("%s: served %d of %d (shed %d, failed %d)", p.Policy, p.Served, p.Requests, p.Shed, p.Failed)
		}
		if p.SLOAttainment <= 0 {
			t.Errorf("%s: SLO attainment %v on a light load", p.Policy, p.SLOAttainment)
		}
	}
	again := run(t, f, synthetic(40, 4, 50*time.Millisecond, 20), func(c *Config) { c.Policies, c.Parallel = names, 1 })
	a, _ := json.Marshal(res)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Fatal("two runs of the peer policies with the same seed differ")
	}
}

// Config.PeerPolicies adds configured variants by name; a bad one is a
// config error, and so is naming one that is not there.
func TestPeerPoliciesConfigured(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	tr := synthetic(10, 2, 100*time.Millisecond, 5)
	v := peer.LLMDPrefixLoadConfig()
	res := run(t, f, tr, func(c *Config) {
		c.PeerPolicies = []peer.Policy{peer.LLMD(v)}
		c.Policies = []string{v.Name, v.Name + peer.LocalSuffix, "llm-d"}
	})
	if len(res.Policies) != 3 || res.Policies[0].Policy != v.Name || res.Policies[0].Served != res.Policies[0].Requests {
		t.Fatalf("configured variant: %+v", res.Policies)
	}
	cfg := DefaultConfig()
	cfg.Fleet, cfg.Policies = f, []string{v.Name}
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("unconfigured variant: %v, want ErrConfig", err)
	}
	cfg.PeerPolicies = []peer.Policy{{Name: "a,b", New: peer.LLMD(v).New}}
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad peer policy name: %v, want ErrConfig", err)
	}
	bad := peer.DefaultLLMDConfig()
	bad.Name, bad.QueueWeight = "bad", -1
	cfg.PeerPolicies, cfg.Policies = []peer.Policy{peer.LLMD(bad)}, []string{"bad"}
	b, err := New(cfg, synthetic(2, 1, time.Millisecond, 1))
	if err == nil {
		_, err = b.Run(t.Context())
	}
	if err == nil {
		t.Fatal("an invalid llm-d config ran")
	}
}

// Routers are configured with each engine's chunked-prefill budget
// (max_num_batched_tokens × replicas), as vLLM workers report it.
func TestPeerFleetBudget(t *testing.T) {
	f := parseFleet(t, `
max_utilization: 0.95
block_tokens: 512
network_ms: {a: {a: 1}}
clusters: [{name: fe, region: a, demand_share: 1}]
engines:
  - {name: h, region: a, sku: h100, replicas: 2, max_batch: 64, kv_cache_tokens: 500000, prefill_tokens_per_s: 9282, decode_step_ms: {base: 28.91, per_seq: 0.3343}}
  - {name: w, region: a, sku: a100, scheduler: whole, max_batch: 64, kv_cache_tokens: 500000, prefill_tokens_per_s: 3086, decode_step_ms: {base: 43.8, per_seq: 0.4095}}
`)
	fi, err := newFleetInfo(f)
	if err != nil {
		t.Fatal(err)
	}
	pf := peerFleet(fi)
	if got := pf.Engines[0].MaxBatchedTokens; got != 2*8192 {
		t.Errorf("h100 × 2 budget %d, want 16384", got)
	}
	if got := pf.Engines[1].MaxBatchedTokens; got != 0 {
		t.Errorf("whole-mode engine budget %d, want 0 (unknown)", got)
	}
	if pf.Engines[0].Slots != 128 || pf.Engines[0].KVCacheTokens != 1_000_000 {
		t.Errorf("h100 × 2: slots %d, KV %d", pf.Engines[0].Slots, pf.Engines[0].KVCacheTokens)
	}
}
