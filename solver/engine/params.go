package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Params describes one engine: a model served on one SKU. The names follow
// the fleet file (prefill_tokens_per_s, decode_step_ms{base, per_seq},
// max_batch, kv_cache_tokens, block_tokens) so a caller copies them over
// field by field.
type Params struct {
	// PrefillTokensPerS is the prefill throughput of one replica: a prefill
	// iteration over n uncached prompt tokens lasts n/PrefillTokensPerS s.
	PrefillTokensPerS float64
	// PrefillOverheadMs is a fixed cost added to every prefill iteration.
	PrefillOverheadMs float64
	// DecodeBaseMs and DecodePerSeqMs give one decode step at batch size b:
	// DecodeBaseMs + DecodePerSeqMs*b milliseconds.
	DecodeBaseMs   float64
	DecodePerSeqMs float64
	// MaxBatch is the most requests one replica runs at once (prefilling
	// and decoding together).
	MaxBatch int
	// KVCacheTokens is one replica's KV memory in tokens. It sizes the
	// prefix cache (KVCacheTokens/BlockTokens blocks) and, with
	// KVAdmission, bounds the tokens reserved by running requests.
	KVCacheTokens int
	// BlockTokens is the size of one prefix block (the unit of Blocks).
	BlockTokens int
	// KVAdmission makes admission reserve PromptTokens+OutputTokens of KV
	// per request and stop while the reservation would exceed
	// KVCacheTokens (a request alone on the engine is always admitted).
	KVAdmission bool
	// Replicas is the initial number of ready (and total) replicas; 0
	// means 1. SetReplicas changes it later.
	Replicas int
	// Scheduler is the iteration model: SchedulerWhole (the zero value)
	// or SchedulerChunked, vLLM V1's chunked prefill. DefaultParams and
	// fleets default to chunked.
	Scheduler Scheduler
	// MaxNumBatchedTokens is chunked prefill's per-step token budget of
	// one replica (vLLM's max_num_batched_tokens): decode tokens first,
	// then prompt chunks. It must be at least MaxBatch, as vLLM requires
	// of max_num_seqs. Whole mode ignores it.
	MaxNumBatchedTokens int
}

// Scheduler selects how an engine forms iterations.
type Scheduler uint8

const (
	// SchedulerWhole is continuous batching without chunked prefill: a
	// prefill iteration computes whole prompts, and decoding stops
	// during it.
	SchedulerWhole Scheduler = iota
	// SchedulerChunked is vLLM V1's chunked prefill: every step has a
	// token budget, filled with one token per decoding request, then
	// with prompt chunks in arrival order.
	SchedulerChunked
)

// String returns the fleet file's name of s: "whole" or "chunked".
func (s Scheduler) String() string {
	switch s {
	case SchedulerWhole:
		return "whole"
	case SchedulerChunked:
		return "chunked"
	}
	return fmt.Sprintf("Scheduler(%d)", uint8(s))
}

// ParseScheduler returns the scheduler named s ("chunked" or "whole").
func ParseScheduler(s string) (Scheduler, error) {
	switch strings.ToLower(s) {
	case "chunked":
		return SchedulerChunked, nil
	case "whole":
		return SchedulerWhole, nil
	}
	return 0, fmt.Errorf("%w: scheduler %q (want chunked or whole)", ErrInvalid, s)
}

// Calibrated defaults: llama2-70b, tensor parallel 4, fitted from the
// SplitwiseSim measurements (github.com/Mutinifni/splitwise-sim,
// data/perf_model.csv, MIT licence), all 105 rows per SKU (21
// configurations x 5 repetitions; prompts 128-8192 tokens, batches 1-64).
// Prefill: least squares through the origin of prompt_time against
// prompt_size*batch_size. Decode: ordinary least squares of token_time
// against batch_size. calibrate_test.go re-derives these numbers from the
// trimmed copy in testdata/.
//
//	sku   prefill tok/s (R2)   decode base ms   decode per-seq ms (R2)
//	h100  9282 (0.999)         28.91            0.3343 (0.968)
//	a100  3086 (0.994)         43.80            0.4095 (0.935)
//
// So an 8192-token prompt prefills in 883 ms on h100 (measured: 943 ms) and a
// decode step at batch 64 takes 50.3 ms (measured: 52.0 ms).
//
// Token budget: vLLM's EngineArgs.get_batch_defaults
// (vllm/engine/arg_utils.py) gives the OpenAI API server
// max_num_batched_tokens = 8192 on GPUs with at least 70 GiB that are not
// A100s (H100, H200, MI300X), and 2048 elsewhere, A100-80GB included
// (vLLM PR #17885: larger budgets lowered A100 throughput). The defaults
// follow it, since ilb models online serving behind a router.
//
// KV cache: llama2-70b keeps 80 layers x 8 KV heads x 128 dims x 2 (K and V)
// x 2 bytes = 320 KiB per token. Four 80 GiB GPUs at vLLM's default 0.9
// memory fraction, less 138 GB of fp16 weights (68.98e9 parameters), leave
// about 171 GB, or 522k tokens; 500k leaves room for activations. The same
// holds for A100-80GB. MaxBatch 64 is the largest batch measured: beyond it
// the decode fit would be an extrapolation. BlockTokens 512 is the block
// size of the Mooncake traces' hash_ids.
const (
	h100PrefillTokensPerS = 9282
	h100DecodeBaseMs      = 28.91
	h100DecodePerSeqMs    = 0.3343
	a100PrefillTokensPerS = 3086
	a100DecodeBaseMs      = 43.80
	a100DecodePerSeqMs    = 0.4095
	defaultMaxBatch       = 64
	defaultKVCacheTokens  = 500_000
	defaultBlockTokens    = 512
	h100BatchedTokens     = 8192
	a100BatchedTokens     = 2048
	// DefaultMaxNumBatchedTokens is the budget WithDefaults gives an
	// engine whose SKU has no defaults: vLLM's for large GPUs.
	DefaultMaxNumBatchedTokens = h100BatchedTokens
)

// DefaultParams returns the calibrated parameters for a SKU ("h100" or
// "a100", case-insensitive; the data set's "h100-80gb" and "a100-80gb" are
// accepted too) and false for any other SKU.
func DefaultParams(sku string) (Params, bool) {
	p := Params{MaxBatch: defaultMaxBatch, KVCacheTokens: defaultKVCacheTokens, BlockTokens: defaultBlockTokens, Replicas: 1,
		Scheduler: SchedulerChunked}
	switch strings.ToLower(sku) {
	case "h100", "h100-80gb":
		p.PrefillTokensPerS, p.DecodeBaseMs, p.DecodePerSeqMs = h100PrefillTokensPerS, h100DecodeBaseMs, h100DecodePerSeqMs
		p.MaxNumBatchedTokens = h100BatchedTokens
	case "a100", "a100-80gb":
		p.PrefillTokensPerS, p.DecodeBaseMs, p.DecodePerSeqMs = a100PrefillTokensPerS, a100DecodeBaseMs, a100DecodePerSeqMs
		p.MaxNumBatchedTokens = a100BatchedTokens
	default:
		return Params{}, false
	}
	return p, true
}

// ErrInvalid is wrapped by every error about bad parameters or requests.
var ErrInvalid = errors.New("engine: invalid")

// maxTokens bounds token counts so that no time computation can overflow.
const maxTokens = 1 << 30

// Validate reports the first problem with p, wrapping ErrInvalid.
func (p Params) Validate() error {
	switch {
	case !positive(p.PrefillTokensPerS):
		return fmt.Errorf("%w: prefill_tokens_per_s %v must be positive", ErrInvalid, p.PrefillTokensPerS)
	case !nonNegative(p.PrefillOverheadMs):
		return fmt.Errorf("%w: prefill overhead %v ms must be >= 0", ErrInvalid, p.PrefillOverheadMs)
	case !nonNegative(p.DecodeBaseMs) || !nonNegative(p.DecodePerSeqMs):
		return fmt.Errorf("%w: decode_step_ms base %v, per_seq %v must be >= 0", ErrInvalid, p.DecodeBaseMs, p.DecodePerSeqMs)
	case p.DecodeBaseMs+p.DecodePerSeqMs > 3.6e6:
		return fmt.Errorf("%w: decode step %v ms is over an hour", ErrInvalid, p.DecodeBaseMs+p.DecodePerSeqMs)
	case p.MaxBatch < 1 || p.MaxBatch > maxTokens:
		return fmt.Errorf("%w: max_batch %d must be in [1, 2^30]", ErrInvalid, p.MaxBatch)
	case p.BlockTokens < 1 || p.BlockTokens > maxTokens:
		return fmt.Errorf("%w: block_tokens %d must be in [1, 2^30]", ErrInvalid, p.BlockTokens)
	case p.KVCacheTokens < 0 || p.KVCacheTokens > maxTokens:
		return fmt.Errorf("%w: kv_cache_tokens %d must be in [0, 2^30]", ErrInvalid, p.KVCacheTokens)
	case p.Replicas < 0 || p.Replicas > maxReplicas:
		return fmt.Errorf("%w: replicas %d must be in [0, %d]", ErrInvalid, p.Replicas, maxReplicas)
	case p.Scheduler > SchedulerChunked:
		return fmt.Errorf("%w: scheduler %v", ErrInvalid, p.Scheduler)
	case p.Scheduler == SchedulerChunked && (p.MaxNumBatchedTokens < p.MaxBatch || p.MaxNumBatchedTokens > maxTokens):
		return fmt.Errorf("%w: max_num_batched_tokens %d must be in [max_batch %d, 2^30] (vLLM requires max_num_batched_tokens >= max_num_seqs)",
			ErrInvalid, p.MaxNumBatchedTokens, p.MaxBatch)
	}
	return nil
}

// maxReplicas keeps MaxBatch*replicas and cache sizes within int32 indexes.
const maxReplicas = 1024

func positive(x float64) bool    { return x > 0 && !math.IsInf(x, 1) }
func nonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// WithDefaults returns p with its zero fields filled from DefaultParams of
// sku (the decode step only when both of its terms are zero), Replicas
// at least 1 and, in chunked mode, MaxNumBatchedTokens from the SKU or
// else DefaultMaxNumBatchedTokens (raised to MaxBatch if that is larger).
// The scheduler is the caller's. known reports whether sku has defaults. The engine simulator
// and the backtester both map fleet engines through it, so they model the
// same engine.
func (p Params) WithDefaults(sku string) (filled Params, known bool) {
	def, known := DefaultParams(sku)
	if known {
		fillZero(&p.PrefillTokensPerS, def.PrefillTokensPerS)
		fillZero(&p.MaxBatch, def.MaxBatch)
		fillZero(&p.KVCacheTokens, def.KVCacheTokens)
		fillZero(&p.BlockTokens, def.BlockTokens)
		if p.Scheduler == SchedulerChunked {
			fillZero(&p.MaxNumBatchedTokens, max(def.MaxNumBatchedTokens, p.MaxBatch))
		}
		if p.DecodeBaseMs == 0 && p.DecodePerSeqMs == 0 {
			p.DecodeBaseMs, p.DecodePerSeqMs = def.DecodeBaseMs, def.DecodePerSeqMs
		}
	}
	fillZero(&p.Replicas, 1)
	if p.Scheduler == SchedulerChunked {
		fillZero(&p.MaxNumBatchedTokens, max(DefaultMaxNumBatchedTokens, p.MaxBatch))
	}
	return p, known
}

func fillZero[T int | float64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}
