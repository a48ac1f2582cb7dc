package peer

import (
	"errors"
	"time"
)

// SGLang's router (sgl-router), policy cache_aware, as read from
// sgl-project/sglang:
//
//   - sgl-router/src/policies/cache_aware.rs @026f853b: loads over all
//     the router's workers, healthy or not; imbalanced when max − min >
//     balance_abs_threshold AND max > balance_rel_threshold · min. Then
//     the least-loaded healthy worker (the first on ties) takes the
//     request and the text is inserted for it. Otherwise the tree's
//     prefix match: if matched characters / text characters >
//     cache_threshold the matched node's tenant (the first of its map),
//     else the tenant with the smallest tree; the text is inserted for
//     it. A chosen worker that is unhealthy falls back to the first
//     healthy one, without an insert.
//   - sgl-router/src/main.rs @0129b029 (CLI and Python launcher
//     defaults): cache_threshold 0.3, balance_abs_threshold 64,
//     balance_rel_threshold 1.5, eviction_interval_secs 120,
//     max_tree_size 2^26 (characters per tenant; the library's own
//     defaults, 0.5/32/1.1/30/10000, are not what ships).
//   - the load is the router's own in-flight count, incremented at
//     dispatch and decremented at completion.
//
// The tree is over characters of the routing text (the prompt, or the
// chat messages joined), not tokens. The trace has block hashes, not
// text, so the tree here is over blocks: a node per trace block,
// weighing its tokens × 4 characters (4 characters a token), which is
// exact for whole blocks; a match that would end inside a block (a
// turn's partial last block, extended by the next turn) counts up to the
// block before it, as in the engine model. On a miss the smallest tree
// wins: a fresh or emptied worker takes every cache miss until it has
// grown (SGLang PR #14305's "death spiral"), as shipped. SGLang's
// successor gateway (smg, 2026) has since added KV-usage triggers and
// load-aware misses; they are not modelled.

// SGLangConfig is SGLang cache_aware's configuration.
type SGLangConfig struct {
	Name             string
	CacheThreshold   float64
	BalanceAbs       int
	BalanceRel       float64
	EvictionInterval time.Duration
	MaxTreeSize      int64 // characters per tenant
	CharsPerToken    int
}

// DefaultSGLangConfig is cache_aware with the CLI's defaults.
func DefaultSGLangConfig() SGLangConfig {
	return SGLangConfig{Name: "sglang", CacheThreshold: 0.3, BalanceAbs: 64, BalanceRel: 1.5,
		EvictionInterval: 120 * time.Second, MaxTreeSize: 1 << 26, CharsPerToken: 4}
}

// Validate reports the first problem with c.
func (c SGLangConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("sglang: no name")
	case !(c.CacheThreshold >= 0 && c.CacheThreshold <= 1):
		return errors.New("sglang: cache_threshold must be in [0, 1]")
	case c.BalanceAbs < 0 || !(c.BalanceRel >= 0):
		return errors.New("sglang: balance thresholds must be >= 0")
	case c.EvictionInterval <= 0 || c.MaxTreeSize < 1 || c.CharsPerToken < 1:
		return errors.New("sglang: eviction interval, max tree size and characters per token must be positive")
	}
	return nil
}

// SGLang returns the SGLang cache_aware policy configured by c.
func SGLang(c SGLangConfig) Policy {
	return Policy{Name: c.Name, About: "SGLang cache_aware: prefix tree over the text, smallest tree on a miss, least in-flight when imbalanced (64 and 1.5x)",
		New: func(f *Fleet, cl int, seed uint64) (Router, error) {
			if err := c.Validate(); err != nil {
				return nil, err
			}
			tree := newSGLangTree(len(f.Engines), seed)
			tree.nodes.reserve(f.Clusters[cl].Blocks) // a node per distinct block at most
			return &sglang{cfg: c, f: f, inflight: newInflight(f), tree: tree,
				nextEvict: int64(c.EvictionInterval)}, nil
		}}
}

type sglang struct {
	inflight
	cfg       SGLangConfig
	f         *Fleet
	tree      *sglangTree
	nextEvict int64
	req       *Request
	cand      []int32
	found     []int32
}

func (s *sglang) charsOf(k int) int32 {
	bt, p := s.f.BlockTokens, s.req.PromptTokens
	return int32((min((k+1)*bt, p) - min(k*bt, p)) * s.cfg.CharsPerToken)
}

func (s *sglang) Pick(v View, r *Request) int {
	if now := v.Now(); now >= s.nextEvict {
		s.tree.evict(s.cfg.MaxTreeSize)
		s.nextEvict = now + int64(s.cfg.EvictionInterval)
	}
	s.cand = v.Candidates(s.cand[:0])
	if len(s.cand) == 0 {
		return NoEngine
	}
	s.req = r
	s.found = s.found[:0]
	for range r.Blocks {
		s.found = append(s.found, -1)
	}
	w := s.choose(v, r)
	if w >= 0 {
		s.tree.insert(r.Blocks, s.charsOf, s.found, int32(w), v.Now())
	} else {
		w = int(s.cand[0]) // the chosen worker is unhealthy: the first healthy one, no insert
	}
	s.inflight[w]++
	return w
}

// choose applies cache_aware's rule and returns the worker whose tree
// gets the text, or -1 when the rule picked an unhealthy worker.
func (s *sglang) choose(v View, r *Request) int {
	if s.imbalanced(v.Members()) {
		best := s.cand[0]
		for _, e := range s.cand[1:] {
			if s.inflight[e] < s.inflight[best] {
				best = e
			}
		}
		return int(best)
	}
	matched, tenant := s.tree.match(r.Blocks, s.charsOf, s.found)
	text := int64(r.PromptTokens * s.cfg.CharsPerToken)
	w := tenant
	if text == 0 || tenant < 0 || float64(matched)/float64(text) <= s.cfg.CacheThreshold {
		w = s.tree.smallest() // found stays valid: nodes are the same whoever holds them
	}
	for _, e := range s.cand {
		if e == w {
			return int(w)
		}
	}
	return -1
}

// imbalanced is cache_aware's switch, over all the router's workers.
func (s *sglang) imbalanced(members []int32) bool {
	lo, hi := -1, 0
	for _, e := range members {
		n := s.inflight[e]
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi-lo > s.cfg.BalanceAbs && float64(hi) > float64(lo)*s.cfg.BalanceRel
}
