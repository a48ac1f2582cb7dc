package peer

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// NVIDIA Dynamo's KV router, as read from ai-dynamo/dynamo:
//
//   - lib/kv-router/src/scheduling/selector/default.rs @07a6c9ce: a
//     worker's cost is prefill_load_scale · max(0, raw_prefill_blocks −
//     overlap_score_credit · device_overlap_blocks) + decode_cost_blocks
//     (+ host/disk tiers and an active-request term, all 0 here), with
//     raw_prefill_blocks = (active_prefill_tokens + isl)/block_size and
//     decode_cost_blocks = the worker's active blocks + the request's
//     blocks it does not have active. At temperature 0 (the default)
//     the lowest cost wins, exact ties by uniform reservoir sampling;
//     above 0, a softmax over min-max normalised costs. With the
//     defaults this is the classic overlap_score_weight·prefill + decode
//     formula with weight 1.
//   - scheduling/config.rs @0243c51b: overlap_score_credit 1.0,
//     prefill_load_scale 1.0, router_temperature 0, use_kv_events true,
//     router_ttl_secs 120 (without events), router_queue_threshold 16.0
//     (queue while every worker has active prefill tokens above 16 ×
//     max_num_batched_tokens, 10,000,000 when a worker does not report
//     it), overlap_score_credit_decay off, replica sync off. The busy
//     (shedding) thresholds are unconfigured by default
//     (LoadThresholdConfig::default), so nothing is refused.
//   - sequences (ActiveSequences, new_tokens, mark_prefill_completed): a
//     request's prefill tokens are isl − overlap·block_size, dropped at
//     its first token; its blocks are freed at completion. The queue
//     also holds while every worker has max_num_seqs requests active.
//
// Signals: the overlap comes from the radix tree. With KV events (the
// default) the tree is the engines' prefix caches, which View.CachedBlocks
// reads (events delivered at once); with KVEvents false the router
// inserts what it routes, with the 120 s TTL. The load is the router's
// own ActiveSequences, updated at once (no replica sync: each front-end's
// router sees only its own requests). Block size: the engine's (vLLM's
// 16 tokens), so a 512-token trace block is 32 Dynamo blocks; a partial
// last block counts its full 16-token blocks.

// DynamoConfig is a Dynamo KV router's configuration.
type DynamoConfig struct {
	Name               string
	OverlapScoreCredit float64
	PrefillLoadScale   float64
	Temperature        float64
	// BlockTokens is the engines' KV block size, the router's unit.
	BlockTokens int
	// KVEvents feeds the radix tree from the engines' caches; without,
	// the router inserts what it routes, for TTL.
	KVEvents    bool
	TTL         time.Duration
	MaxTreeSize int // Dynamo blocks, without KV events
	// QueueThreshold defers requests while every worker's active prefill
	// tokens exceed it × max_num_batched_tokens (or it has max_num_seqs
	// requests active); NaN disables the queue.
	QueueThreshold float64
	// DefaultMaxBatchedTokens stands for a worker's unreported
	// max_num_batched_tokens.
	DefaultMaxBatchedTokens int
}

// DefaultDynamoConfig is Dynamo's KV router as shipped.
func DefaultDynamoConfig() DynamoConfig {
	return DynamoConfig{Name: "dynamo", OverlapScoreCredit: 1, PrefillLoadScale: 1, BlockTokens: 16, KVEvents: true,
		TTL: 120 * time.Second, MaxTreeSize: 1 << 20, QueueThreshold: 16, DefaultMaxBatchedTokens: 10_000_000}
}

// Validate reports the first problem with c.
func (c DynamoConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("dynamo: no name")
	case !(c.OverlapScoreCredit >= 0 && c.OverlapScoreCredit <= 1):
		return errors.New("dynamo: overlap_score_credit must be in [0, 1]")
	case !(c.PrefillLoadScale >= 0) || !(c.Temperature >= 0) || math.IsInf(c.PrefillLoadScale, 1) || math.IsInf(c.Temperature, 1):
		return errors.New("dynamo: prefill_load_scale and temperature must be finite and >= 0")
	case c.BlockTokens < 1 || c.TTL <= 0 || c.MaxTreeSize < 1 || c.DefaultMaxBatchedTokens < 1:
		return errors.New("dynamo: block size, TTL, tree size and default max batched tokens must be positive")
	case c.QueueThreshold < 0 || math.IsInf(c.QueueThreshold, 1):
		return errors.New("dynamo: queue threshold must be finite and >= 0 (NaN disables the queue)")
	}
	return nil
}

// Dynamo returns the Dynamo policy configured by c.
func Dynamo(c DynamoConfig) Policy {
	return Policy{Name: c.Name, About: "Dynamo KV router: min prefill + decode blocks, KV-event overlap, router-side active blocks; queue at 16× batch",
		New: func(f *Fleet, _ int, seed uint64) (Router, error) {
			if err := c.Validate(); err != nil {
				return nil, err
			}
			return newDynamo(c, f, seed), nil
		}}
}

type dynamo struct {
	cfg    DynamoConfig
	f      *Fleet
	active *dynamoActive
	approx *dynamoApprox // nil with KV events
	rng    *rand.Rand

	cand    []int32
	overlap []int // by worker, Dynamo blocks
	present []int // by worker, Dynamo blocks of the request already active there
	cost    []float64
	prob    []float64
	req     *Request // for weightOf
}

func newDynamo(c DynamoConfig, f *Fleet, seed uint64) *dynamo {
	n := len(f.Engines)
	d := &dynamo{cfg: c, f: f, active: newDynamoActive(n, f.BlockTokens, c.BlockTokens),
		rng: rand.New(rand.NewPCG(seed, 0xd7a)), overlap: make([]int, n), present: make([]int, n)}
	if !c.KVEvents {
		d.approx = newDynamoApprox(int64(c.TTL), c.MaxTreeSize)
	}
	return d
}

func (d *dynamo) weightOf(k int) int32 { return d.active.weight(k, d.req.PromptTokens) }

func (d *dynamo) Pick(v View, r *Request) int {
	d.cand = v.Candidates(d.cand[:0])
	if len(d.cand) == 0 {
		return NoEngine
	}
	if d.allBusy() {
		return Defer
	}
	d.req = r
	clear(d.overlap)
	clear(d.present)
	d.measure(v, r)
	w := d.choose(r)
	prefill := max(r.PromptTokens-d.overlap[w]*d.cfg.BlockTokens, 0) // new_tokens
	d.active.add(r.ID, w, r.Blocks, r.PromptTokens, int64(prefill))
	if d.approx != nil {
		d.approx.insert(v.Now(), r.Blocks, d.weightOf, w)
	}
	return w
}

// allBusy is the queue's test: every worker has max_num_seqs requests
// active or more than threshold × max_num_batched_tokens prompt tokens
// to prefill.
func (d *dynamo) allBusy() bool {
	if math.IsNaN(d.cfg.QueueThreshold) {
		return false
	}
	for _, w := range d.cand {
		e := d.f.Engines[w]
		batched := e.MaxBatchedTokens
		if batched <= 0 {
			batched = d.cfg.DefaultMaxBatchedTokens
		}
		seqs := e.Slots > 0 && d.active.requests[w] >= e.Slots
		if !seqs && float64(d.active.prefill[w]) <= d.cfg.QueueThreshold*float64(batched) {
			return false
		}
	}
	return true
}

// measure fills the candidates' overlap (radix tree) and the request's
// blocks they already have active.
func (d *dynamo) measure(v View, r *Request) {
	if d.approx != nil {
		d.approx.overlap(v.Now(), r.Blocks, d.weightOf, d.overlap)
	} else {
		for _, w := range d.cand {
			n := v.CachedBlocks(int(w), r.Blocks)
			for k := range n {
				d.overlap[w] += int(d.weightOf(k))
			}
		}
	}
	d.active.present(r.Blocks, d.present)
}

// choose returns the worker of least cost (temperature 0) or draws one
// from the softmax of the costs.
func (d *dynamo) choose(r *Request) int {
	bs := float64(d.cfg.BlockTokens)
	total := 0
	for k := range r.Blocks {
		total += int(d.weightOf(k))
	}
	d.cost = d.cost[:0]
	for _, w := range d.cand {
		raw := float64(d.active.prefill[w]+int64(r.PromptTokens)) / bs
		prefill := d.cfg.PrefillLoadScale * max(raw-d.cfg.OverlapScoreCredit*float64(d.overlap[w]), 0)
		decode := float64(d.active.blocks[w] + total - d.present[w])
		d.cost = append(d.cost, prefill+decode)
	}
	if d.cfg.Temperature > 0 {
		return int(d.cand[d.softmax()])
	}
	best, ties := 0, 0
	for k, c := range d.cost {
		switch {
		case k == 0 || c < d.cost[best]:
			best, ties = k, 1
		case c == d.cost[best]:
			if ties++; d.rng.IntN(ties) == 0 { // reservoir sampling
				best = k
			}
		}
	}
	return int(d.cand[best])
}

// softmax draws an index with probability ∝ exp(−normalised cost / T).
func (d *dynamo) softmax() int {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range d.cost {
		lo, hi = min(lo, c), max(hi, c)
	}
	d.prob = d.prob[:0]
	sum := 0.0
	for _, c := range d.cost {
		p := 1.0
		if hi > lo {
			p = math.Exp(-(c - lo) / (hi - lo) / d.cfg.Temperature)
		}
		d.prob = append(d.prob, p)
		sum += p
	}
	u := d.rng.Float64() * sum
	for k, p := range d.prob {
		if u -= p; u <= 0 {
			return k
		}
	}
	return len(d.prob) - 1
}

// FirstToken is mark_prefill_completed.
func (d *dynamo) FirstToken(_ View, r *Request, _ int) { d.active.prefilled(r.ID) }

// Completed frees the request's blocks.
func (d *dynamo) Completed(_ View, r *Request, _ int, _ bool) { d.active.done(r.ID) }
