package routing

import (
	"sync/atomic"

	"github.com/ilb-router/ilb/solver/sched"
)

// SizesLen is how many recent new conversations Sizes remembers.
const SizesLen = 256

// Sizes remembers the prompt lengths (tokens, estimated where the
// data plane cannot count them) of a cluster's last SizesLen new
// conversations, so that shedding refuses the largest first (Shed): a
// refused prompt of 40,000 tokens frees the prefill of forty of 1,000,
// so the same number of refusals leaves the engines more of what the
// requests they serve need. Safe for concurrent use without a lock;
// concurrent Observes may overwrite one another's entry, which leaves
// a sample of the recent prompts as good as the full one. The zero
// value is empty and ready.
type Sizes struct {
	next atomic.Uint64
	ring [SizesLen]atomic.Int32
}

// ShedNoting is Shed, and then, for a new conversation, remembers its
// prompt in sizes (nil: shedding by key, nothing to remember): a prompt
// is ranked among those before it, itself included once. The data plane
// and the backtester shed through it.
func ShedNoting(h uint64, f, newShare float64, ongoing bool, sizes *Sizes, tokens int) bool {
	shed := Shed(h, f, newShare, ongoing, sizes, tokens)
	if !ongoing && sizes != nil {
		sizes.Observe(tokens)
	}
	return shed
}

// Observe remembers a new conversation's prompt of tokens tokens;
// unknown (≤ 0) lengths are not remembered.
func (s *Sizes) Observe(tokens int) {
	if tokens <= 0 {
		return
	}
	i := s.next.Add(1) - 1
	s.ring[i%SizesLen].Store(tokens32(tokens))
}

// Largest reports whether a new conversation whose key hashes to h and
// whose prompt has tokens tokens is among the largest share r of the
// remembered ones: counting itself among them, its rank from the top
// (those larger, then its place among those of its length, itself
// included, in the order of sched.ShedKey) falls in the first r of the
// n+1. On a steady stream of prompts that sheds a share r of them, as
// shedding by key does, the largest; prompts of one length are shed by
// key, as without Sizes. Raising r only adds conversations. Without
// lengths to compare (nothing remembered, tokens unknown, or s nil) it is
// sched.ShedKey(h, r). It does not allocate.
func (s *Sizes) Largest(tokens int, h uint64, r float64) bool {
	if !(r > 0) || r >= 1 || s == nil || tokens <= 0 {
		return sched.ShedKey(h, r)
	}
	n := min(s.next.Load(), SizesLen)
	if n == 0 {
		return sched.ShedKey(h, r)
	}
	t := tokens32(tokens)
	larger, equal := 0, 1 // itself
	for i := range n {
		switch x := s.ring[i].Load(); {
		case x > t:
			larger++
		case x == t:
			equal++
		}
	}
	quota := r * float64(n+1)
	if float64(larger) >= quota {
		return false
	}
	return sched.ShedKey(h, (quota-float64(larger))/float64(equal))
}

// tokens32 is a positive token count as the ring stores it.
func tokens32(tokens int) int32 { return int32(min(tokens, 1<<31-1)) }
