package routing

import (
	"math"

	"github.com/ilb-router/ilb/solver/sched"
)

// The data plane's per-request guardrails, in the order a pick applies
// them: Shed, then Sticky for an ongoing conversation, then Choose (a
// table engine that is usable and, for a new conversation, not Over its
// bounded load), and Spilled says what the conversation's memory keeps.
// None of them allocates.

// MinShed is the smallest shed fraction acted on: solvers return
// round-off (1e-16) where they mean zero, and a round-off shed would
// refuse every new conversation while no new one had been seen.
const MinShed = 1e-6

// Shed reports whether the request whose key hashes to h is shed, when
// its cluster's shed fraction is f and a share newShare of the cluster's
// recent requests came from new conversations. New conversations are shed
// first: new ones at f/newShare (all of them when f ≥ newShare, or when no
// new one was seen lately), the largest prompts first (sizes.Largest with
// the request's prompt of tokens tokens; by key when sizes is nil, the
// shed order "key"); ongoing ones at (f − newShare)/(1 − newShare), by
// key, only when f > newShare (a newShare that is not a number counts as
// 1, as before any request). Keys are chosen by sched.ShedKey, so every
// replica sheds the same ongoing conversations and raising f only adds
// to the shed ones.
func Shed(h uint64, f, newShare float64, ongoing bool, sizes *Sizes, tokens int) bool {
	if !(f >= MinShed) {
		return false
	}
	if f >= 1 {
		return true
	}
	n := 1.0 // unknown: as before any request, all new
	if newShare < 1 {
		n = max(newShare, 0)
	}
	if !ongoing {
		return n == 0 || sizes.Largest(tokens, h, f/n)
	}
	return f > n && sched.ShedKey(h, (f-n)/(1-n))
}

// Over reports whether an engine already holds its bounded load for a new
// conversation: at least ⌈spill × share × (total+1)⌉ of the cluster's
// total in-flight requests, inflight being its own (consistent hashing
// with bounded loads, Mirrokni et al. 2018). spill is 1+ε; +Inf turns the
// bound off. share is the engine's bounded-load share (Shares).
func Over(spill, share float64, inflight, total int64) bool {
	if math.IsInf(spill, 1) {
		return false
	}
	return float64(inflight) >= math.Ceil(spill*share*float64(total+1))
}

// Shares sets dst[i], the bounded-load share of table engine i, from the
// engines' slot counts: its share of the slots of the usable engines that
// have slots, or, with equal (the data plane's stale policy: spill balances
// live in-flight counts instead of trusting old weights), an equal share of
// them. Unusable engines and engines without slots get 0.
func Shares(dst []float64, counts []int, usable func(i int) bool) {
	sharesOf(dst, counts, usable, false)
}

// EqualShares is Shares under the stale policy: each usable engine with
// slots gets the same share.
func EqualShares(dst []float64, counts []int, usable func(i int) bool) {
	sharesOf(dst, counts, usable, true)
}

func sharesOf(dst []float64, counts []int, usable func(i int) bool, equal bool) {
	total, n := 0, 0
	for i, c := range counts {
		if c > 0 && usable(i) {
			total += c
			n++
		}
	}
	for i, c := range counts {
		switch {
		case c == 0 || !usable(i):
			dst[i] = 0
		case equal:
			dst[i] = 1 / float64(n)
		default:
			dst[i] = float64(c) / float64(total)
		}
	}
}

// Sticky reports whether an ongoing conversation goes back to the engine a
// spill sent it to rather than to its table engine: its memory says it was
// spilled (served differs from the primary it had then) and the table
// still gives it that primary. The caller also checks that the engine it
// goes back to is usable and still has slots.
func Sticky(memPrimary, memServed, primary int) bool {
	return memServed != memPrimary && memPrimary == primary
}

// Choose returns the table index the key with hash h goes to: its own
// slot's engine, else the next in sched's probe sequence, skipping every
// engine for which skip is true and, for a new conversation, every engine
// for which full is true (bounded load, latency penalty). When full
// leaves a new conversation nowhere to go it is ignored: load limits
// never refuse a request a usable engine could take.
func Choose(t *sched.Table, h uint64, ongoing bool, skip, full func(i int) bool) (int, bool) {
	if !ongoing {
		if idx, ok := t.PickSkip(h, func(i int) bool { return skip(i) || full(i) }); ok {
			return idx, true
		}
	}
	return t.PickSkip(h, skip)
}

// Spilled reports whether a request that went to table engine chosen
// instead of its primary was spilled (its primary was usable for it, so
// load sent it away): the conversation's memory then keeps chosen as the
// engine that served it, so later turns follow it there (Sticky). When
// the primary was unusable the memory keeps the primary: the
// conversation goes back to it once it recovers.
func Spilled(chosen, primary int, primaryUsable bool) bool {
	return chosen != primary && primaryUsable
}
