package backtest_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest"
)

// A conversation of three turns and a one-off request on a two-engine
// fleet. Round-robin alternates engines: the second turn happens to land
// where the first ran and reuses its 1024 cached tokens, the third lands
// on the other engine and prefills all 3072. Hash keeps the conversation
// on one engine: 3072 of the 6656 prompt tokens come from the cache.
func Example() {
	fleet, err := schemas.ParseFleet([]byte(`
network_ms: {r: {r: 1}}
clusters: [{name: fe, region: r, demand_share: 1}]
engines:
  - {name: e0, region: r, sku: h100, prefill_tokens_per_s: 10000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 8, kv_cache_tokens: 100000}
  - {name: e1, region: r, sku: h100, prefill_tokens_per_s: 10000, decode_step_ms: {base: 20, per_seq: 0}, max_batch: 8, kv_cache_tokens: 100000}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := backtest.ReadTrace(strings.NewReader(`timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks
0,fe,chat,1024,10,1 2
500,fe,solo,512,10,9
2000,fe,chat,2048,10,1 2 3 4
4000,fe,chat,3072,10,1 2 3 4 5 6
`), backtest.ReadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := backtest.DefaultConfig()
	cfg.Fleet, cfg.Policies = fleet, []string{backtest.PolicyRoundRobin, backtest.PolicyHash}
	b, err := backtest.New(cfg, tr)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := b.Run(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range res.Policies {
		fmt.Printf("%-11s TTFT p50 %5.1f ms, cache hit %.3f, follow-ups moved %.0f%%\n",
			p.Policy, p.TTFTMs.P50, p.CacheHitRatio, 100*p.FollowupMovedRatio)
	}
	// Output:
	// round-robin TTFT p50 123.4 ms, cache hit 0.154, follow-ups moved 50%
	// hash        TTFT p50 123.4 ms, cache hit 0.462, follow-ups moved 0%
}
