package prior

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ilb-router/ilb/solver/engine"
)

// h100 is the example fleet's h100 (schemas.ExampleFleet).
var h100 = engine.Params{PrefillTokensPerS: 8700, DecodeBaseMs: 29.6, DecodePerSeqMs: 0.35, MaxBatch: 64,
	KVCacheTokens: 500000, BlockTokens: 512, Replicas: 1}

// TestProfileKnownAnswer pins the formulas of Profile on hand-computed
// values: prefill 1000/8700 s = 114.9 ms, step(1) 29.95 ms, step(64)
// 52.0 ms, s = 114.9 + 199·52/64 = 276.6 ms.
func TestProfileKnownAnswer(t *testing.T) {
	p := Profile("h", h100, Shape{PromptTokens: 1000, OutputTokens: 200})
	prefill := 1000.0 / 8.7
	s := prefill + 199*52.0/64
	tbotFull := 52.0 / (1 - prefill/s)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"capacity", p.CapacityRps, 1000 / s},
		{"ttft base", p.TTFT.BaseMs, prefill + 29.95/2},
		{"ttft queue (no second moment: M/M/c)", p.TTFT.QueueMs, s / 8},
		{"tbot base", p.TBOT.BaseMs, 29.95},
		{"tbot slope", p.TBOT.SlopeMs, 0.75 * (tbotFull - 29.95)},
	} {
		if math.Abs(c.got-c.want) > 1e-9*c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if p.Name != "h" {
		t.Errorf("name %q", p.Name)
	}
}

func TestProfileShape(t *testing.T) {
	base := Profile("h", h100, Shape{PromptTokens: 4000, OutputTokens: 200})
	// The second moment gives the Pollaczek–Khinchine wait E[p²]/(2E[p]).
	pk := Profile("h", h100, Shape{PromptTokens: 4000, OutputTokens: 200, UncachedSq: 3 * 4000 * 4000})
	if want := 1000 * 3 * 4000 * 4000 / (2 * 4000 * 8700.0); math.Abs(pk.TTFT.QueueMs-want) > 1e-9 {
		t.Errorf("P-K queue %v ms, want %v", pk.TTFT.QueueMs, want)
	}
	if pk.CapacityRps != base.CapacityRps || pk.TTFT.BaseMs != base.TTFT.BaseMs {
		t.Error("the second moment changed more than the queue term")
	}
	// Cached tokens are not prefilled: half cached is a 2000-token prompt.
	half := Profile("h", h100, Shape{PromptTokens: 4000, CachedFraction: 0.5, OutputTokens: 200})
	if want := Profile("h", h100, Shape{PromptTokens: 2000, OutputTokens: 200}); !reflect.DeepEqual(half, want) {
		t.Errorf("half cached %+v, want %+v", half, want)
	}
	// Replicas scale capacity and shrink the M/M/c wait; they leave the
	// per-replica P-K wait alone.
	three := h100
	three.Replicas = 3
	if got := Profile("h", three, Shape{PromptTokens: 4000, OutputTokens: 200}); math.Abs(got.CapacityRps-3*base.CapacityRps) > 1e-9 ||
		math.Abs(got.TTFT.QueueMs-base.TTFT.QueueMs/3) > 1e-9 {
		t.Errorf("3 replicas: %+v, base %+v", got, base)
	}
	if got := Profile("h", three, Shape{PromptTokens: 4000, OutputTokens: 200, UncachedSq: 3 * 4000 * 4000}); got.TTFT.QueueMs != pk.TTFT.QueueMs {
		t.Errorf("3 replicas: P-K queue %v, want %v", got.TTFT.QueueMs, pk.TTFT.QueueMs)
	}
	// Chunked prefill: each step of the prompt pays the decode base (a
	// 20k-token prompt takes 3 steps of 8192); the rest is the same.
	chunked := h100
	chunked.Scheduler, chunked.MaxNumBatchedTokens = engine.SchedulerChunked, 8192
	for _, prompt := range []float64{4000, 20000} {
		w := Profile("h", h100, Shape{PromptTokens: prompt, OutputTokens: 200})
		c := Profile("h", chunked, Shape{PromptTokens: prompt, OutputTokens: 200})
		steps := math.Ceil(prompt / 8192)
		if math.Abs(c.TTFT.BaseMs-w.TTFT.BaseMs-steps*29.6) > 1e-9 || c.CapacityRps != w.CapacityRps || c.TBOT != w.TBOT {
			t.Errorf("%v-token prompt: chunked %+v, whole %+v; want TTFT base + %v·29.6 ms, the rest equal", prompt, c, w, steps)
		}
	}
	// One-token answers never decode: TBOT stays one full step.
	if one := Profile("h", h100, Shape{PromptTokens: 4000, OutputTokens: 1}); math.Abs(one.TBOT.SlopeMs-0.75*(52-29.95)) > 1e-9 {
		t.Errorf("one-token outputs: tbot slope %v", one.TBOT.SlopeMs)
	}
}

// TestProfileHeavyTailsMatchEngineModel checks the P-K queue term against
// the engine model with exponentially distributed prompts (E[p²] = 2E[p]²):
// the engine's mean TTFT stays within 30% of the prior's up to ρ = 0.6,
// and above it the prior errs on the safe side (it overestimates, by 40-50%
// at ρ = 0.7-0.8, because ρ counts decode time that does not delay a
// prefill). The M/M/c term of a prior without the second moment
// underestimates from ρ = 0.3 on, by half at ρ = 0.8. Both schedulers.
func TestProfileHeavyTailsMatchEngineModel(t *testing.T) {
	chunked := h100
	chunked.Scheduler, chunked.MaxNumBatchedTokens = engine.SchedulerChunked, 8192
	for _, params := range []engine.Params{h100, chunked} {
		t.Run(params.Scheduler.String(), func(t *testing.T) { checkHeavyTails(t, params) })
	}
}

func checkHeavyTails(t *testing.T, h100 engine.Params) {
	const prompt, output = 4000.0, 200
	p := Profile("h", h100, Shape{PromptTokens: prompt, OutputTokens: output, UncachedSq: 2 * prompt * prompt})
	mmc := Profile("h", h100, Shape{PromptTokens: prompt, OutputTokens: output})
	for _, rho := range []float64{0.2, 0.3, 0.5, 0.6, 0.7, 0.8} {
		got := simulate(t, h100, rho*p.CapacityRps, prompt, output, 6000, 1)
		t.Logf("ρ=%.1f: engine %.0f ms, P-K prior %.0f ms", rho, got, p.TTFT.BaseMs+p.TTFT.QueueMs*rho/(1-rho))
		pred := p.TTFT.BaseMs + p.TTFT.QueueMs*rho/(1-rho)
		predMMC := mmc.TTFT.BaseMs + mmc.TTFT.QueueMs*rho/(1-rho)
		if rho <= 0.6 && math.Abs(pred/got-1) > 0.3 {
			t.Errorf("ρ=%.1f: engine model mean TTFT %.0f ms, P-K prior %.0f ms", rho, got, pred)
		}
		if pred < 0.95*got {
			t.Errorf("ρ=%.1f: P-K prior %.0f ms is optimistic against the engine model's %.0f ms", rho, pred, got)
		}
		if rho >= 0.3 && !(predMMC < 0.9*got) {
			t.Errorf("ρ=%.1f: M/M/c prior %.0f ms, engine model %.0f ms: want it clearly optimistic here", rho, predMMC, got)
		}
	}
}

// simulate runs the engine model at a Poisson load of requests with
// exponentially distributed prompts (mean prompt tokens, no cache reuse)
// and returns the mean TTFT after a warm-up fifth.
func simulate(t *testing.T, p engine.Params, loadRPS, prompt float64, output, n int, seed uint64) float64 {
	t.Helper()
	e, err := engine.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []engine.Done
	now := int64(0)
	sum, count := 0.0, 0
	for i := range n {
		now += int64(rng.ExpFloat64() / loadRPS * 1e9)
		tokens := max(1, int(rng.ExpFloat64()*prompt))
		if err := e.Submit(now, engine.Request{ID: uint64(i), Tag: uint64(i), PromptTokens: tokens, OutputTokens: output}); err != nil {
			t.Fatal(err)
		}
		out = e.Advance(now, out[:0])
		for _, d := range out {
			if d.Tag >= uint64(n/5) {
				sum += d.TTFTMs
				count++
			}
		}
	}
	return sum / float64(count)
}

// TestProfileKVLimitedBatch: with KV admission, long prompts fill the KV
// memory before MaxBatch requests run. Mooncake's mean request (12,000
// prompt tokens, 343 output) on the example h100 (500,000 tokens of KV)
// runs about 40 at once, and the prior's capacity must follow the engine
// model's saturated throughput (within 3%; at MaxBatch 64 it was 6% above
// it), in both schedulers. Without KV admission, or for short prompts,
// the batch is MaxBatch as before.
func TestProfileKVLimitedBatch(t *testing.T) {
	const prompt, output = 12000, 343
	kv := h100
	kv.KVAdmission = true
	chunked := kv
	chunked.Scheduler, chunked.MaxNumBatchedTokens = engine.SchedulerChunked, 8192
	for _, params := range []engine.Params{kv, chunked} {
		p := Profile("h", params, Shape{PromptTokens: prompt, OutputTokens: output})
		got := saturated(t, params, prompt, output, 600)
		t.Logf("%s: engine model %.3f rps, prior %.3f rps (%.3f at MaxBatch)", params.Scheduler, got, p.CapacityRps, Profile("h", h100, Shape{PromptTokens: prompt, OutputTokens: output}).CapacityRps)
		if math.Abs(p.CapacityRps/got-1) > 0.03 {
			t.Errorf("%s: prior capacity %.3f rps, engine model %.3f rps at saturation", params.Scheduler, p.CapacityRps, got)
		}
		if full := Profile("h", h100, Shape{PromptTokens: prompt, OutputTokens: output}); !(full.CapacityRps > 1.05*p.CapacityRps) {
			t.Errorf("without KV admission the batch is MaxBatch: capacity %.3f, want above %.3f", full.CapacityRps, p.CapacityRps)
		}
	}
	short := Shape{PromptTokens: 1000, OutputTokens: 200} // 64 × 1,200 tokens fit
	if a, b := Profile("h", kv, short), Profile("h", h100, short); !reflect.DeepEqual(a, b) {
		t.Errorf("short prompts: %+v with KV admission, %+v without; want the same", a, b)
	}
}

// saturated is the engine model's throughput, in requests per second,
// with n identical requests submitted at once (no cache reuse), between
// the 10th and the 90th percentile of their finishing times.
func saturated(t *testing.T, p engine.Params, prompt, output, n int) float64 {
	t.Helper()
	e, err := engine.New(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := e.Submit(0, engine.Request{ID: uint64(i), Tag: uint64(i), PromptTokens: prompt, OutputTokens: output}); err != nil {
			t.Fatal(err)
		}
	}
	var out []engine.Done
	var finish []int64
	for {
		at, busy := e.NextEventTime()
		if !busy {
			break
		}
		out = e.Advance(at, out[:0])
		for _, d := range out {
			finish = append(finish, d.FinishNs)
		}
	}
	lo, hi := len(finish)/10, len(finish)*9/10
	return float64(hi-lo) / (float64(finish[hi]-finish[lo]) / 1e9)
}
