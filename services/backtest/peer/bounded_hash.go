package peer

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Consistent hashing with bounded loads (Mirrokni, Thorup and
// Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018; the
// Vimeo/HAProxy hash-balance-factor): the conversation's key hashes onto
// a ring of the cluster's engines, and the request goes to the first
// engine clockwise whose load is below ⌈c·(total+1)/n⌉, where total is
// the requests in flight over the n healthy engines, c = 1.25 (the
// default of lafikl/liblb, brpc's c_murmurhash_bl and SGLang's
// prefix_hash). The load is the router's own in-flight count. Each engine
// has ringPoints points on the ring, with equal weight (the algorithm has
// no notion of capacity); unhealthy engines are skipped.

// c = 1.25 = boundedNum/boundedDen, kept as a ratio so the bound is
// exact integer arithmetic.
const (
	boundedNum = 5
	boundedDen = 4
	ringPoints = 100
)

type ringPoint struct {
	hash   uint64
	engine int32
}

type boundedHash struct {
	inflight
	ring []ringPoint
	cand []int32
	ok   []bool // by engine: a candidate now
}

func boundedHashPolicy() Policy {
	return Policy{Name: "bounded-hash", About: "consistent hashing with bounded loads (c = 1.25) on the conversation key, router's own in-flight counts",
		New: func(f *Fleet, c int, _ uint64) (Router, error) {
			b := &boundedHash{inflight: newInflight(f), ok: make([]bool, len(f.Engines))}
			for _, e := range f.Clusters[c].Eligible {
				h := fnv.New64a()
				h.Write([]byte(f.Engines[e].Name))
				base := h.Sum64()
				for k := range ringPoints {
					b.ring = append(b.ring, ringPoint{hash: mix64(base + uint64(k)), engine: e})
				}
			}
			slices.SortFunc(b.ring, func(x, y ringPoint) int {
				if x.hash != y.hash {
					return cmp.Compare(x.hash, y.hash)
				}
				return int(x.engine - y.engine)
			})
			return b, nil
		}}
}

// bound is ⌈c·(total+1)/n⌉.
func bound(total, n int) int { return ceilDiv(boundedNum*(total+1), boundedDen*n) }

func (b *boundedHash) Pick(v View, r *Request) int {
	b.cand = v.Candidates(b.cand[:0])
	if len(b.cand) == 0 {
		return NoEngine
	}
	total := 0
	for _, e := range b.cand {
		b.ok[e] = true
		total += b.inflight[e]
	}
	limit := bound(total, len(b.cand))
	key := mix64(r.Key)
	start, _ := slices.BinarySearchFunc(b.ring, key, func(p ringPoint, k uint64) int { return cmp.Compare(p.hash, k) })
	w := -1
	for k := range b.ring {
		p := b.ring[(start+k)%len(b.ring)]
		if b.ok[p.engine] && b.inflight[p.engine] < limit {
			w = int(p.engine)
			break
		}
	}
	for _, e := range b.cand {
		b.ok[e] = false
	}
	if w < 0 { // unreachable: some engine is below the average, hence the bound
		w = int(b.cand[0])
	}
	b.inflight[w]++
	return w
}
