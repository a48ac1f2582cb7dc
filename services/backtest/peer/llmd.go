package peer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// llm-d's endpoint picker (EPP), the default scheduling profile, as read
// from llm-d/llm-d-router (the EPP's home since May 2026; the same
// profile as GIE v1.x and the llm-d "inference-scheduling" guide):
//
//   - pkg/epp/config/loader/defaults.go @0b59e4ed: queue-scorer ×2,
//     kv-cache-utilization-scorer ×2, prefix-cache-scorer ×3, max-score
//     picker; no filter; default-priority traffic is never shed.
//   - scheduling/scorer/queuedepth/queue.go @2342697f: (max−q)/(max−min)
//     over the endpoints with metrics, 1 for all when max = min; q is
//     vllm:num_requests_waiting. kv-cache-utilization: 1 −
//     vllm:kv_cache_usage_perc. Scores are clamped to [0, 1] and summed
//     with their weights, unnormalised (0..7).
//   - scheduling/picker/maxscore/picker.go @0fa77a00 and picker/common.go
//     @5155e4cb: stable sort by score, then the top tie is rotated by a
//     round-robin counter (PRs #2515, #2709, Aug-Sep 2026); before that
//     the candidates were shuffled first (random ties): RandomTies.
//   - requestcontrol/dataproducer/approximateprefix/{plugin,types,
//     hashing}.go @09a534fc, @257db69a: blocks of blockSizeTokens (16,
//     auto-tuned from the engine's cache_config_info block_size, then
//     raised to at least 64 tokens, PR #1160), 4 characters a token,
//     the trailing partial block hashed, at most maxPrefixTokensToMatch
//     = 131072 tokens (PR #1548; 256 blocks before it); lookup walks the
//     request's hashes and stops at the first one no server holds (a
//     global stop: a server's count may include blocks after a gap of
//     its own); score = matched/total blocks. After the pick, every hash
//     of the request is added to the chosen server's LRU, whose capacity
//     is the engine's num_gpu_blocks when auto-tuned (else 31250).
//   - Metrics are polled every 50 ms (refresh-metrics-interval); nothing
//     is added for requests the EPP has just routed.
//
// Mapping onto the trace: one 512-token trace block is 512/b router
// blocks; each engine's LRU holds trace blocks, num_gpu_blocks·b/512 of
// them (with b = 64 and vLLM's 16-token blocks the index believes an
// engine holds four times the KV it has, as the real one does).

// LLMDConfig is an llm-d EPP's configuration.
type LLMDConfig struct {
	// Name is the policy's name (several variants may run side by side).
	Name string
	// Scorer weights; 0 leaves a scorer out.
	PrefixCacheWeight        float64
	QueueWeight              float64
	KVCacheUtilizationWeight float64
	// LoadAwareWeight weighs llm-d's load-aware-scorer: 0.5 for an empty
	// queue, else 0.5·(1 − min(q, LoadAwareThreshold)/LoadAwareThreshold).
	LoadAwareWeight    float64
	LoadAwareThreshold int
	// EngineBlockTokens is the engine's own KV block size (vLLM's 16),
	// which the prefix producer auto-tunes its block size from, and which
	// sizes num_gpu_blocks.
	EngineBlockTokens int
	// MinBlockTokens raises an auto-tuned block size to at least this.
	MinBlockTokens int
	// MaxPrefixTokens caps the prefix hashed, in tokens; when 0,
	// MaxPrefixBlocks caps it in blocks (0: no cap).
	MaxPrefixTokens int
	MaxPrefixBlocks int
	// LRUCapacityPerServer is the LRU size in blocks without AutoTune.
	LRUCapacityPerServer int
	// AutoTune takes the block size and the LRU capacity from the engine.
	AutoTune bool
	// RandomTies breaks exact ties at random instead of round-robin.
	RandomTies bool
	// PollInterval is how often engine metrics are scraped.
	PollInterval time.Duration
}

// DefaultLLMDConfig is llm-d's default profile as shipped.
func DefaultLLMDConfig() LLMDConfig {
	return LLMDConfig{Name: "llm-d", PrefixCacheWeight: 3, QueueWeight: 2, KVCacheUtilizationWeight: 2,
		LoadAwareThreshold: 128, EngineBlockTokens: 16, MinBlockTokens: 64, MaxPrefixTokens: 131072,
		MaxPrefixBlocks: 256, LRUCapacityPerServer: 31250, AutoTune: true, PollInterval: 50 * time.Millisecond}
}

// LLMDPrefixLoadConfig is the profile of the llm-d LMBench experiment
// (llm-d-benchmark exp-3, config_llm-d-deploy.env): prefix-aware scorer
// weight 2 and load-aware scorer weight 1, no queue or KV scorer. The
// prefix index is today's; the May 2025 scheduler's own prefix scorer
// is not modelled.
func LLMDPrefixLoadConfig() LLMDConfig {
	c := DefaultLLMDConfig()
	c.Name = "llm-d-prefix-load"
	c.PrefixCacheWeight, c.QueueWeight, c.KVCacheUtilizationWeight, c.LoadAwareWeight = 2, 0, 0, 1
	return c
}

// Validate reports the first problem with c.
func (c LLMDConfig) Validate() error {
	for _, w := range []float64{c.PrefixCacheWeight, c.QueueWeight, c.KVCacheUtilizationWeight, c.LoadAwareWeight} {
		if !(w >= 0) || math.IsInf(w, 1) {
			return fmt.Errorf("llm-d: scorer weight %v must be finite and >= 0", w)
		}
	}
	switch {
	case c.Name == "":
		return errors.New("llm-d: no name")
	case c.EngineBlockTokens < 1 || c.MinBlockTokens < 0 || c.MaxPrefixTokens < 0 || c.MaxPrefixBlocks < 0:
		return errors.New("llm-d: block sizes must be >= 1 and caps >= 0")
	case c.LRUCapacityPerServer < 1 || c.LoadAwareThreshold < 1:
		return errors.New("llm-d: LRU capacity and load-aware threshold must be >= 1")
	case c.PollInterval <= 0:
		return errors.New("llm-d: poll interval must be positive")
	}
	return nil
}

// LLMD returns the llm-d policy configured by c.
func LLMD(c LLMDConfig) Policy {
	return Policy{Name: c.Name, About: "llm-d EPP: prefix ×3, queue ×2, KV use ×2 (by default) on metrics polled every 50 ms; max score",
		New: func(f *Fleet, cl int, seed uint64) (Router, error) {
			if err := c.Validate(); err != nil {
				return nil, err
			}
			return newLLMD(c, f, cl, seed), nil
		}}
}

// llmd is one cluster's EPP.
type llmd struct {
	cfg       LLMDConfig
	f         *Fleet
	b         int // router block size in tokens
	maxBlocks int
	index     *holderIndex
	metrics   []Metrics
	polled    bool
	rng       *rand.Rand
	counter   int // the picker's round-robin counter

	cand  []int32
	score []float64
	match []int   // by engine, router blocks matched; zeroed after each pick
	found []int32 // by block of the request: its index entry, -1 none
	top   []int32
}

func newLLMD(c LLMDConfig, f *Fleet, cl int, seed uint64) *llmd {
	p := &llmd{cfg: c, f: f, b: c.EngineBlockTokens, metrics: make([]Metrics, len(f.Engines)),
		rng: rand.New(rand.NewPCG(seed, 0x11d)), match: make([]int, len(f.Engines))}
	if c.AutoTune {
		p.b = max(p.b, c.MinBlockTokens)
	}
	p.maxBlocks = c.MaxPrefixBlocks
	if c.MaxPrefixTokens > 0 {
		p.maxBlocks = max(c.MaxPrefixTokens/p.b, 1)
	}
	caps := make([]int, len(f.Engines))
	for e, eng := range f.Engines {
		entries := c.LRUCapacityPerServer
		if c.AutoTune && eng.KVCacheTokens > 0 {
			entries = eng.KVCacheTokens / c.EngineBlockTokens // num_gpu_blocks
		}
		caps[e] = max(entries*p.b/max(f.BlockTokens, 1), 1)
	}
	p.index = newHolderIndex(caps)
	p.index.reserve(f.Clusters[cl].Blocks)
	return p
}

func (p *llmd) PollInterval() time.Duration { return p.cfg.PollInterval }

func (p *llmd) Poll(_ View, m []Metrics) {
	copy(p.metrics, m)
	p.polled = true
}

func (p *llmd) Pick(v View, r *Request) int {
	p.cand = v.Candidates(p.cand[:0])
	if len(p.cand) == 0 {
		return NoEngine
	}
	span := newBlockSpan(p.f.BlockTokens, r.PromptTokens, p.b, true, p.maxBlocks)
	n := span.traceBlocks(len(r.Blocks))
	p.matchPrefix(r.Blocks[:n], span)
	p.scoreAll(span.total)
	e := p.pickMax()
	clear(p.match)
	for i, h := range r.Blocks[:n] {
		p.index.addAt(h, p.found[i], e)
	}
	return e
}

// matchPrefix counts, per engine, the router blocks of the request the
// index says it holds, walking the blocks until one no engine holds.
func (p *llmd) matchPrefix(blocks []uint64, span blockSpan) {
	p.found = p.found[:0]
	for range blocks {
		p.found = append(p.found, -1)
	}
	for i, h := range blocks {
		k := p.index.entry(h)
		if k < 0 {
			return
		}
		p.found[i] = k
		w := span.upTo(i+1) - span.upTo(i)
		for _, x := range p.index.holdersOf(k) {
			p.match[x.engine] += w
		}
	}
}

// scoreAll computes every candidate's weighted score.
func (p *llmd) scoreAll(total int) {
	qmin, qmax := math.MaxInt, math.MinInt
	for _, e := range p.cand {
		q := p.metrics[e].Waiting
		qmin, qmax = min(qmin, q), max(qmax, q)
	}
	p.score = p.score[:0]
	for _, e := range p.cand {
		s := 0.0
		if total > 0 {
			s += p.cfg.PrefixCacheWeight * clamp01(float64(p.match[e])/float64(total))
		}
		if p.polled {
			m := p.metrics[e]
			s += p.cfg.QueueWeight*queueScore(m.Waiting, qmin, qmax) +
				p.cfg.KVCacheUtilizationWeight*clamp01(1-m.KVUsage) +
				p.cfg.LoadAwareWeight*loadAwareScore(m.Waiting, p.cfg.LoadAwareThreshold)
		}
		p.score = append(p.score, s)
	}
}

// queueScore is llm-d's queue-scorer: the shortest queue 1, the longest
// 0, linear between; 1 for all when they are equal.
func queueScore(q, qmin, qmax int) float64 {
	if qmax == qmin {
		return 1
	}
	return float64(qmax-q) / float64(qmax-qmin)
}

// loadAwareScore is llm-d's load-aware-scorer.
func loadAwareScore(q, threshold int) float64 {
	if q == 0 {
		return 0.5
	}
	return 0.5 * (1 - float64(min(q, threshold))/float64(threshold))
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

// pickMax is the max-score picker: the highest score, exact ties broken
// by rotating through the tied engines (or at random with RandomTies).
func (p *llmd) pickMax() int {
	best := math.Inf(-1)
	p.top = p.top[:0]
	for k, s := range p.score {
		switch {
		case s > best:
			best, p.top = s, append(p.top[:0], p.cand[k])
		case s == best:
			p.top = append(p.top, p.cand[k])
		}
	}
	n := len(p.top)
	if n == 1 {
		return int(p.top[0])
	}
	if p.cfg.RandomTies {
		return int(p.top[p.rng.IntN(n)])
	}
	rot := p.counter % n
	if p.counter++; p.counter >= n {
		p.counter = 0
	}
	return int(p.top[rot])
}
