package backtest

import (
	"fmt"
	"strconv"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

// HubChildren is how many distinct next blocks make a prefix a shared
// prompt (a "hub") rather than part of one conversation: a system prompt
// is continued by many conversations, a conversation's own history by its
// next turn (two continuations where the last, partial block of one turn
// is rewritten by the next, a few more for regenerated answers).
const HubChildren = 4

// AssignConversations gives every request without a conversation id an
// affinity key taken from its leading prefix blocks, and a request with
// neither its own key ("req-N", N its index in arrival order).
//
// The rule, over the trie of every request's blocks: walk a request's
// blocks from the first, through prefixes that are hubs (HubChildren or
// more continuations) or chains (one continuation, or none), and stop at
// the first prefix that branches two or three ways (a turn boundary). The
// key is the blocks up to the last hub passed, plus one: the first block
// of the conversation's own text. Every later turn of that conversation
// repeats those blocks, so it gets the same key; turns of other
// conversations differ in that block. Without a hub the key is the first
// block. In the Mooncake traces, where every prompt starts with the same
// block, the key is the first two blocks.
func (t *Trace) AssignConversations() {
	tr := newTrie()
	for i := range t.Requests {
		if t.Requests[i].Conversation == "" {
			tr.add(t.Requests[i].Blocks)
		}
	}
	for i := range t.Requests {
		r := &t.Requests[i]
		switch {
		case r.Conversation != "":
		case len(r.Blocks) == 0:
			r.Conversation = "req-" + strconv.Itoa(i)
		default:
			r.Conversation = prefixKey(r.Blocks[:tr.keyDepth(r.Blocks)])
		}
	}
}

// prefixKey names a block prefix by a hash of its ids.
func prefixKey(blocks []uint64) string {
	h := uint64(0x9e3779b97f4a7c15)
	for _, b := range blocks {
		h = splitmix(h ^ b)
	}
	return fmt.Sprintf("pfx-%016x", h)
}

// trie counts the distinct continuations of every block prefix.
type trie struct {
	next     map[[2]uint64]int32 // (node, block) -> child node
	children []int32             // by node; node 0 is the empty prefix
}

func newTrie() *trie {
	return &trie{next: make(map[[2]uint64]int32), children: []int32{0}}
}

func (t *trie) add(blocks []uint64) {
	n := int32(0)
	for _, b := range blocks {
		k := [2]uint64{uint64(n), b}
		c, ok := t.next[k]
		if !ok {
			c = int32(len(t.children))
			t.children = append(t.children, 0)
			t.next[k] = c
			t.children[n]++
		}
		n = c
	}
}

// keyDepth is the number of leading blocks that make the key (>= 1).
func (t *trie) keyDepth(blocks []uint64) int {
	n, lastHub := int32(0), 0
	for i, b := range blocks {
		n = t.next[[2]uint64{uint64(n), b}]
		c := t.children[n]
		if c >= HubChildren {
			lastHub = i + 1
			continue
		}
		if c >= 2 {
			break
		}
	}
	return min(lastHub+1, len(blocks))
}

// AssignClusters gives every request without a cluster one of the fleet's
// clusters, drawn by demand share from a hash of its conversation key, so
// that all turns of a conversation come from one cluster and the result
// does not depend on anything else. Call AssignConversations first. A
// request naming a cluster the fleet lacks is an error.
func (t *Trace) AssignClusters(f *schemas.Fleet) error {
	cum := make([]float64, len(f.Clusters))
	total := 0.0
	for i, c := range f.Clusters {
		total += c.DemandShare
		cum[i] = total
	}
	for i := range t.Requests {
		r := &t.Requests[i]
		if r.Cluster != "" {
			if _, ok := f.Cluster(r.Cluster); !ok {
				return fmt.Errorf("%w: request %d names cluster %q, which is not in the fleet", ErrBadTrace, i, r.Cluster)
			}
			continue
		}
		u := float64(splitmix(sched.HashKey(r.Conversation))>>11) / (1 << 53) * total
		k := 0
		for k < len(cum)-1 && u >= cum[k] {
			k++
		}
		r.Cluster = f.Clusters[k].Name
	}
	return nil
}

// splitmix is the SplitMix64 finaliser.
func splitmix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// modelSalt separates the model draw from the cluster draw, so that a
// conversation's cluster says nothing about its model.
const modelSalt = 0x2545f4914f6cdd1d

// AssignModels gives every request without a model one from its cluster's
// model mix (the fleet's model_shares, else default_model: Fleet.ModelMix),
// drawn deterministically by its conversation so that all turns of a
// conversation ask for the same model. A request that names a model keeps
// it (whether the fleet serves it is judged when the request is routed).
// Clusters must be assigned first. A fleet that cannot tell a request's
// model (several models, no default_model, no model_shares) is an error.
func (t *Trace) AssignModels(f *schemas.Fleet) error {
	mixes := map[string][]schemas.ModelShare{}
	for i := range t.Requests {
		r := &t.Requests[i]
		if r.Model != "" {
			continue
		}
		mix, ok := mixes[r.Cluster]
		if !ok {
			c, found := f.Cluster(r.Cluster)
			if !found {
				return fmt.Errorf("%w: request %d names cluster %q, which is not in the fleet", ErrBadTrace, i, r.Cluster)
			}
			var err error
			if mix, err = f.ModelMix(c); err != nil {
				return fmt.Errorf("%w: request %d has no model: %w", ErrBadTrace, i, err)
			}
			mixes[r.Cluster] = mix
		}
		r.Model = schemas.ModelAt(mix, float64(splitmix(sched.HashKey(r.Conversation)^modelSalt)>>11)/(1<<53))
	}
	return nil
}
