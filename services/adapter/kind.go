package adapter

import "fmt"

// Kind is the engine software whose metric names a target exposes.
type Kind string

// The engines the adapter understands.
const (
	KindVLLM   Kind = "vllm"
	KindSGLang Kind = "sglang"
)

// ParseKind accepts "vllm" and "sglang".
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if _, ok := metricNames[k]; !ok {
		return "", fmt.Errorf("adapter: unknown engine kind %q (want vllm or sglang)", s)
	}
	return k, nil
}

// names lists, per quantity, the metric family names to read, preferred
// first: newer releases renamed several (vLLM 0.8's V1 engine, for one),
// and the adapter reads whichever the target exports.
type names struct {
	running, waiting, kvUsage, hitRate []string
	ttft, tbotPerRequest, tbotPerToken []string
	finished, aborted                  []string
	promptTokens, outputTokens         []string
	cachedTokens                       []string
}

var metricNames = map[Kind]names{
	KindVLLM: {
		running: []string{"vllm:num_requests_running"},
		waiting: []string{"vllm:num_requests_waiting"},
		// kv_cache_usage_perc since 0.10; gpu_cache_usage_perc before.
		kvUsage: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
		// The V0 engine's block hit rate, used when the token counters
		// are absent.
		hitRate:        []string{"vllm:gpu_prefix_cache_hit_rate"},
		ttft:           []string{"vllm:time_to_first_token_seconds"},
		tbotPerRequest: []string{"vllm:request_time_per_output_token_seconds"},
		// inter_token_latency_seconds since 0.10 replaces
		// time_per_output_token_seconds; both are per token.
		tbotPerToken: []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
		finished:     []string{"vllm:request_success_total"},
		promptTokens: []string{"vllm:prompt_tokens_total"},
		outputTokens: []string{"vllm:generation_tokens_total"},
		// V1 counts prefix cache hits in tokens (hits over queries is the
		// hit rate); 0.8-0.9 named them gpu_prefix_cache_*.
		cachedTokens: []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"},
	},
	KindSGLang: {
		running:        []string{"sglang:num_running_reqs"},
		waiting:        []string{"sglang:num_queue_reqs"},
		kvUsage:        []string{"sglang:token_usage"},
		hitRate:        []string{"sglang:cache_hit_rate"},
		ttft:           []string{"sglang:time_to_first_token_seconds"},
		tbotPerRequest: []string{"sglang:time_per_output_token_seconds"},
		tbotPerToken:   []string{"sglang:inter_token_latency_seconds"},
		finished:       []string{"sglang:num_requests_total"},
		aborted:        []string{"sglang:num_aborted_requests_total"},
		promptTokens:   []string{"sglang:prompt_tokens_total"},
		outputTokens:   []string{"sglang:generation_tokens_total"},
		cachedTokens:   []string{"sglang:cached_tokens_total"},
	},
}
