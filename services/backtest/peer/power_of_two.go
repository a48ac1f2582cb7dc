package peer

import "math/rand/v2"

// powerOfTwo is the power of two choices (Mitzenmacher): draw two distinct
// engines uniformly at random among the healthy candidates and send the
// request to the one with fewer requests in flight, the first draw on a
// tie. It is SGLang's `power_of_two` policy (sgl-router
// src/policies/power_of_two.rs, sglang @026f853b) with the router's own
// in-flight counts as the load, the fallback SGLang uses when no cached
// /get_load value is fresher.
type powerOfTwo struct {
	inflight
	rng  *rand.Rand
	cand []int32
}

func powerOfTwoPolicy() Policy {
	return Policy{Name: "power-of-two", About: "two random choices on the router's own in-flight counts",
		New: func(f *Fleet, _ int, seed uint64) (Router, error) {
			return &powerOfTwo{inflight: newInflight(f), rng: rand.New(rand.NewPCG(seed, 0x9072))}, nil
		}}
}

func (p *powerOfTwo) Pick(v View, _ *Request) int {
	p.cand = v.Candidates(p.cand[:0])
	switch len(p.cand) {
	case 0:
		return NoEngine
	case 1:
		p.inflight[p.cand[0]]++
		return int(p.cand[0])
	}
	i := p.rng.IntN(len(p.cand))
	j := p.rng.IntN(len(p.cand) - 1)
	if j >= i {
		j++
	}
	a, b := int(p.cand[i]), int(p.cand[j])
	e := a
	if p.inflight[b] < p.inflight[a] {
		e = b
	}
	p.inflight[e]++
	return e
}
