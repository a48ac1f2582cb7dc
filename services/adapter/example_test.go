package adapter_test

import (
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/services/adapter"
)

// Two scrapes of a vLLM server five seconds apart: four requests finished
// in between, one with a TTFT under 100 ms and three between 100 and 500
// ms, and the events the adapter publishes for that interval: the
// quantiles 1/8, 3/8, 5/8 and 7/8 of that histogram.
func Example() {
	scrape := func(finished, ttft01, ttft05 int, prompt, cached int) string {
		return fmt.Sprintf(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:request_success_total counter
vllm:request_success_total{finished_reason="stop",model_name="m"} %d
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} %d
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} %d
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} %d
vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} %d
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} %d
vllm:time_to_first_token_seconds_count{model_name="m"} %d
`, finished, prompt, cached, ttft01, ttft01+ttft05, ttft01+ttft05, ttft01+ttft05)
	}
	a, _ := adapter.Parse(strings.NewReader(scrape(10, 8, 2, 10000, 4000)), adapter.KindVLLM)
	b, _ := adapter.Parse(strings.NewReader(scrape(14, 9, 5, 14000, 6000)), adapter.KindVLLM)
	st := adapter.Status("eng-1", 5e9, b)
	fmt.Printf("status: running %d, KV %.2f\n", st.Running, st.KVCacheUtilization)
	comps, _ := adapter.Completions("eng-1", 5e9, adapter.Diff(a, b), 100)
	for _, c := range comps {
		fmt.Printf("completion: prompt %d, cached %d, TTFT %.0f ms\n", c.PromptTokens, c.CachedPromptTokens, c.TTFTMs)
	}
	// Output:
	// status: running 3, KV 0.25
	// completion: prompt 1000, cached 500, TTFT 50 ms
	// completion: prompt 1000, cached 500, TTFT 167 ms
	// completion: prompt 1000, cached 500, TTFT 300 ms
	// completion: prompt 1000, cached 500, TTFT 433 ms
}
