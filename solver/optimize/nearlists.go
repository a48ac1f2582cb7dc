package optimize

import "math"

// nearLists keeps, per engine, the arcs whose b = π − n + y/w was within
// nearMarginMs of the engine's price μ at a reference point. Until prices
// move by more than half the margin from there, no other arc can carry
// flow: an arc's b moves by at most the largest price change Δ, and so
// does μ (an engine's price is monotone in every b of its arcs), so an arc
// left out still has b ≤ μ − margin + 2Δ ≤ μ. Evaluations and the Hessian
// then visit a few dozen arcs per engine instead of every cluster's.
type nearLists struct {
	valid bool
	ref   []float64 // cluster prices at the reference point
	start []int32   // engine e's arcs: slots[start[e]:start[e+1]]
	slots []int32
	// per listed arc, packed from the model and the centre so that a pass
	// over an engine's list reads in order: cluster, network ms, centre y
	clu    []int32
	net, y []float64
}

// slotView is the arcs of one engine an evaluation or Hessian visits:
// slot ids with their clusters, network times and proximal centres, in
// parallel slices.
type slotView struct {
	slots, clu []int32
	net, y     []float64
}

// nearMarginMs is the width of the near lists.
const nearMarginMs = 30.0

// invalidateLists forgets the lists; the centre or κ changed.
func (st *state) invalidateLists() { st.near.valid = false }

// buildLists rebuilds the lists at the evaluated point p.
func (st *state) buildLists(p *point) {
	m, nl := st.m, &st.near
	nl.ref = append(nl.ref[:0], p.pi...)
	nl.start = append(nl.start[:0], 0)
	nl.slots, nl.clu, nl.net, nl.y = nl.slots[:0], nl.clu[:0], nl.net[:0], nl.y[:0]
	if st.yZero {
		st.buildListsZero(p)
		return
	}
	for e := range m.ne {
		floor := p.mu[e] - nearMarginMs
		for k := m.eStart[e]; k < m.eStart[e+1]; k++ {
			c := m.slotClu[k]
			w := st.w[c]
			if w == 0 {
				continue
			}
			b := p.pi[c] - m.slotNet[k]
			if y := st.y[k]; y != 0 {
				b += y / w
			}
			if b > floor {
				nl.slots = append(nl.slots, k)
				nl.clu = append(nl.clu, c)
				nl.net = append(nl.net, m.slotNet[k])
				nl.y = append(nl.y, st.y[k])
			}
		}
		nl.start = append(nl.start, int32(len(nl.slots)))
	}
	nl.valid = true
}

// buildListsZero is buildLists for a centre at zero (a cold first
// round): b = π − n, from the prices bidPrices sets (-Inf for a cluster
// without weight, which never passes the floor), without reading the
// weights and centres of every arc. The same lists.
func (st *state) buildListsZero(p *point) {
	m, nl := st.m, &st.near
	on := st.bidPrices(p.pi)
	for e := range m.ne {
		floor := p.mu[e] - nearMarginMs
		// Cut at the engine's end, so that an index below len(clu) needs
		// no bounds check on clu and net (unsigned: a signed one might be
		// negative, and clu[k] kept its check).
		clu := m.slotClu[:m.eStart[e+1]]
		net := m.slotNet[:len(clu)]
		for k := uint(m.eStart[e]); k < uint(len(clu)); k++ {
			c := clu[k]
			if b := on[c] - net[k]; b > floor {
				nl.slots = append(nl.slots, int32(k))
				nl.clu = append(nl.clu, c)
				nl.net = append(nl.net, net[k])
				nl.y = append(nl.y, 0)
			}
		}
		nl.start = append(nl.start, int32(len(nl.slots)))
	}
	nl.valid = true
}

// listsCover reports whether the lists hold every arc within reach of
// flowing at prices pi, with reach ms to spare.
func (st *state) listsCover(pi []float64, reach float64) bool {
	nl := &st.near
	if !nl.valid {
		return false
	}
	drift := 0.0
	for c, v := range pi {
		if st.w[c] > 0 {
			drift = max(drift, math.Abs(v-nl.ref[c]))
		}
	}
	return 2*drift+reach <= nearMarginMs
}

// engineSlots returns the arcs an evaluation or Hessian of engine e must
// visit: its near list when the lists cover, else all its arcs.
func (st *state) engineSlots(e int, useLists bool) slotView {
	start, slots, clu, net, y := st.slotArrays(useLists)
	lo, hi := start[e], start[e+1]
	return slotView{slots[lo:hi], clu[lo:hi], net[lo:hi], y[lo:hi]}
}

// slotArrays returns the arrays engineSlots cuts every engine's arcs
// from (engine e's are start[e]..start[e+1]): the near lists when they
// cover, else the model's slots with the state's centres.
func (st *state) slotArrays(useLists bool) (start, slots, clu []int32, net, y []float64) {
	if useLists {
		nl := &st.near
		return nl.start, nl.slots, nl.clu, nl.net, nl.y
	}
	m := st.m
	return m.eStart, m.slotIDs, m.slotClu, m.slotNet, st.y
}
