package peer

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// AIBrix's gateway, routing strategy prefix-cache, as read from
// vllm-project/aibrix:
//
//   - pkg/plugins/gateway/algorithms/prefix_cache.go @01de8a51 (and its
//     README): running-request counts per ready pod; a load gate fires
//     when max > AIBRIX_PREFIX_CACHE_LOAD_IMBALANCE_FACTOR · (mean + 1)
//     and max − min ≥ AIBRIX_PREFIX_CACHE_LOAD_IMBALANCE_MIN_GAP (2.0
//     and 8; not set by the release overlay) and restricts the prefix
//     match to the least-loaded pods. The matched pods are shuffled,
//     stable-sorted by match percent (descending) then running requests
//     (ascending), and the first whose count is ≤ mean + factor · std
//     (sample standard deviation, over all ready pods) wins; if none, or
//     nothing matched, the pod with the fewest running requests (random
//     among ties). The request's hashes are then added for the pod.
//     Earlier releases (@429c45e9, up to early 2026) gated on max − min >
//     AIBRIX_PREFIX_CACHE_POD_RUNNING_REQUEST_IMBALANCE_ABS_COUNT, which
//     the release overlay still sets to 16: ImbalanceAbsCount > 0 models
//     that rule.
//   - pkg/utils/prefixcacheindexer/hash.go @0871c212: blocks of
//     AIBRIX_PREFIX_CACHE_BLOCK_SIZE tokens, a partial tail dropped; the
//     walk keeps the pods holding every block so far and stops when none
//     does; match% = (i+1)·100/blocks (integer); one LRU of
//     AIBRIX_PREFIX_CACHE_BLOCK_NUMBER blocks for all pods, 20-minute
//     idle eviction.
//   - config/overlays/release/gateway_plugins_patch.yaml @bcf362fa: the
//     character tokenizer (a "token" is a byte of the prompt), block size
//     128, 200000 blocks, standard-deviation factor 2.
//
// Mapping: with the character tokenizer a block is 128 characters, 32
// tokens at 4 characters a token, so a 512-token trace block is 16 AIBrix
// blocks; the LRU holds 200000 of them, 12500 trace blocks. The running
// counts are the gateway's own (incremented at routing, decremented at
// completion).

// AIBrixConfig is AIBrix prefix-cache's configuration.
type AIBrixConfig struct {
	Name              string
	BlockChars        int
	BlockNumber       int
	ImbalanceFactor   float64
	ImbalanceMinGap   int
	ImbalanceAbsCount int // > 0: the pre-2026 gate, max − min > it
	StdDevFactor      float64
	IdleEviction      time.Duration
	CharsPerToken     int
}

// DefaultAIBrixConfig is prefix-cache with the release overlay.
func DefaultAIBrixConfig() AIBrixConfig {
	return AIBrixConfig{Name: "aibrix", BlockChars: 128, BlockNumber: 200000, ImbalanceFactor: 2, ImbalanceMinGap: 8,
		StdDevFactor: 2, IdleEviction: 20 * time.Minute, CharsPerToken: 4}
}

// Validate reports the first problem with c.
func (c AIBrixConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("aibrix: no name")
	case c.BlockChars < 1 || c.BlockNumber < 1 || c.CharsPerToken < 1 || c.IdleEviction <= 0:
		return errors.New("aibrix: block size, block number, characters per token and eviction must be positive")
	case !(c.ImbalanceFactor >= 0) || c.ImbalanceMinGap < 0 || c.ImbalanceAbsCount < 0 || !(c.StdDevFactor >= 0):
		return errors.New("aibrix: imbalance and deviation settings must be >= 0")
	}
	return nil
}

// AIBrix returns the AIBrix prefix-cache policy configured by c.
func AIBrix(c AIBrixConfig) Policy {
	return Policy{Name: c.Name, About: "AIBrix prefix-cache: longest prefix within mean + 2 std of running requests; least-loaded gate when skewed",
		New: func(f *Fleet, cl int, seed uint64) (Router, error) {
			if err := c.Validate(); err != nil {
				return nil, err
			}
			index := newAIBrixIndex(c.BlockNumber, int64(c.IdleEviction))
			index.reserve(f.Clusters[cl].Blocks, f.BlockTokens*c.CharsPerToken/c.BlockChars)
			return &aibrix{cfg: c, f: f, inflight: newInflight(f), rng: rand.New(rand.NewPCG(seed, 0xa1b)),
				index: index, pct: make([]int, len(f.Engines))}, nil
		}}
}

type aibrix struct {
	inflight
	cfg   AIBrixConfig
	f     *Fleet
	index *aibrixIndex
	rng   *rand.Rand
	req   *Request

	cand    []int32
	set     []int32 // pods still matching / allowed
	matched []int32
	found   []int32 // by block: its entry as the match walk found it, -1 none
	pct     []int   // by engine, match percent
	counts  []float64
}

// weightOf is the AIBrix blocks in trace block k (full ones only).
func (a *aibrix) weightOf(k int) int32 {
	bt, p := a.f.BlockTokens, a.req.PromptTokens
	return int32(min((k+1)*bt, p)*a.cfg.CharsPerToken/a.cfg.BlockChars - min(k*bt, p)*a.cfg.CharsPerToken/a.cfg.BlockChars)
}

func (a *aibrix) Pick(v View, r *Request) int {
	now := v.Now()
	a.index.expire(now)
	a.cand = v.Candidates(a.cand[:0])
	if len(a.cand) == 0 {
		return NoEngine
	}
	a.req = r
	mean, std := a.stats()
	a.set = append(a.set[:0], a.cand...)
	if a.gate(mean) {
		lo := a.inflight[slices.MinFunc(a.cand, func(x, y int32) int { return cmp.Compare(a.inflight[x], a.inflight[y]) })]
		a.set = slices.DeleteFunc(a.set, func(e int32) bool { return a.inflight[e] != lo })
	}
	a.match(now)
	w := a.pickMatched(mean, std)
	if w < 0 {
		w = a.leastRequest()
	}
	for k, h := range r.Blocks {
		if wt := a.weightOf(k); wt > 0 {
			a.index.add(h, a.found[k], wt, int32(w), now)
		}
	}
	a.inflight[w]++
	return w
}

// stats are the mean and sample standard deviation of the running
// requests of the ready pods.
func (a *aibrix) stats() (mean, std float64) {
	a.counts = a.counts[:0]
	for _, e := range a.cand {
		a.counts = append(a.counts, float64(a.inflight[e]))
		mean += float64(a.inflight[e])
	}
	n := float64(len(a.counts))
	mean /= n
	if len(a.counts) <= 1 {
		return mean, 0
	}
	ss := 0.0
	for _, c := range a.counts {
		ss += (c - mean) * (c - mean)
	}
	return mean, math.Sqrt(ss / (n - 1))
}

// gate is the load-imbalance gate.
func (a *aibrix) gate(mean float64) bool {
	lo, hi := -1, 0
	for _, e := range a.cand {
		n := a.inflight[e]
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	if a.cfg.ImbalanceAbsCount > 0 {
		return hi-lo > a.cfg.ImbalanceAbsCount
	}
	return float64(hi) > a.cfg.ImbalanceFactor*(mean+1) && hi-lo >= a.cfg.ImbalanceMinGap
}

// match walks the request's blocks keeping the pods of set that hold
// every block so far, and gives each the percent matched when it
// dropped out (or at the end).
func (a *aibrix) match(now int64) {
	total := 0
	for k := range a.req.Blocks {
		total += int(a.weightOf(k))
	}
	a.matched = a.matched[:0]
	a.found = a.found[:0]
	for range a.req.Blocks {
		a.found = append(a.found, -1)
	}
	done := 0
	for k, h := range a.req.Blocks {
		wt := int(a.weightOf(k))
		if wt == 0 {
			break
		}
		i := a.index.get(h, now)
		if i < 0 {
			return
		}
		a.found[k] = i
		pods := a.index.podsOf(i)
		kept := a.set[:0]
		for _, e := range a.set {
			if slices.Contains(pods, e) {
				kept = append(kept, e)
			}
		}
		if a.set = kept; len(kept) == 0 {
			return
		}
		done += wt
		if k == 0 {
			a.matched = append(a.matched, kept...)
		}
		for _, e := range kept {
			a.pct[e] = done * 100 / total
		}
	}
}

// pickMatched is getTargetPodFromMatchedPods: -1 when no pod matched or
// none is within mean + factor · std.
func (a *aibrix) pickMatched(mean, std float64) int {
	if len(a.matched) == 0 {
		return -1
	}
	a.rng.Shuffle(len(a.matched), func(i, j int) { a.matched[i], a.matched[j] = a.matched[j], a.matched[i] })
	slices.SortStableFunc(a.matched, func(x, y int32) int {
		if c := cmp.Compare(a.pct[y], a.pct[x]); c != 0 {
			return c
		}
		return cmp.Compare(a.inflight[x], a.inflight[y])
	})
	w := -1
	for _, e := range a.matched {
		if float64(a.inflight[e]) <= mean+a.cfg.StdDevFactor*std {
			w = int(e)
			break
		}
	}
	for _, e := range a.matched {
		a.pct[e] = 0
	}
	return w
}

// leastRequest is the fallback: the ready pod with the fewest running
// requests, at random among ties.
func (a *aibrix) leastRequest() int {
	best, ties := -1, 0
	for _, e := range a.cand {
		switch {
		case best < 0 || a.inflight[e] < a.inflight[best]:
			best, ties = int(e), 1
		case a.inflight[e] == a.inflight[best]:
			if ties++; a.rng.IntN(ties) == 0 {
				best = int(e)
			}
		}
	}
	return best
}
