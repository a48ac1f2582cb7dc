package sched

// MaxProbes is how many further slots PickSkip tries after the key's own
// slot before it falls back to ranking engines. It is a constant, not an
// option, because every replica must try the same slots to agree.
const MaxProbes = 8

// PickSkip returns the engine for the key with hash h, avoiding engines
// for which skip returns true (unhealthy, no ready replica, over its load
// bound). If the key's own engine is not skipped it is returned, so keys
// of available engines never move. Otherwise PickSkip tries up to
// MaxProbes further slots from a sequence fixed by h: since slots are
// shared by weight, displaced keys spread over the other engines in
// proportion to their weights. If every probe lands on a skipped engine,
// it returns the non-skipped engine with slots that ranks highest for h by
// rendezvous hashing (an integer score, so all platforms agree). ok is
// false when every engine with slots is skipped.
//
// The result depends only on the table, h and skip, so replicas that agree
// on which engines to skip send a key to the same engine. skip is called
// at most 1+MaxProbes+Len() times, and should answer the same for an index
// within one call. PickSkip does not allocate.
func (t *Table) PickSkip(h uint64, skip func(idx int) bool) (idx int, ok bool) {
	if t.n == 0 {
		return -1, false
	}
	if e := t.PickHash(h); !skip(e) {
		return e, true
	}
	for i := uint64(1); i <= MaxProbes; i++ {
		if e := t.PickHash(probe(h, i)); !skip(e) {
			return e, true
		}
	}
	return t.rank(h, skip)
}

// probe is the i-th slot hash of the probe sequence of key hash h.
func probe(h, i uint64) uint64 { return mix64(h + i*splitGamma) }

// rank returns the non-skipped engine with slots whose rendezvous score
// mix64(h ^ HashKey(name)) is highest; ties go to the lower index.
func (t *Table) rank(h uint64, skip func(idx int) bool) (int, bool) {
	best, bestScore := -1, uint64(0)
	for e, c := range t.counts {
		if c == 0 {
			continue
		}
		if score := mix64(h ^ t.seeds[e]); (best < 0 || score > bestScore) && !skip(e) {
			best, bestScore = e, score
		}
	}
	return best, best >= 0
}
