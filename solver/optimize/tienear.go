package optimize

import "math"

// bidLists keeps, per engine, the clusters whose bid π_c − n_ce was within
// margin of the engine's best bid at reference prices, and the same arcs
// by cluster. While the clusters' prices have moved apart by at most
// margin/2 since (drift: the spread of π − ref, so a common shift does not
// count), an arc left out bids at least margin/2 below the best and can
// neither own its engine nor tie for it: moves and ownership look at the
// lists only, a few dozen arcs per engine instead of every cluster's.
type bidLists struct {
	margin float64
	ref    []float64
	eStart []int32 // engine e's slots: eSlot[eStart[e]:eStart[e+1]]
	eSlot  []int32
	cStart []int32 // cluster c's engines: cEng[cStart[c]:cStart[c+1]]
	cEng   []int32
	fill   []int32   // scratch
	on     []bool    // scratch: per cluster, bids
	bid    []float64 // scratch: one engine's bids
}

// bidMarginMs is the width of the bid lists.
const bidMarginMs = 40.0

// build makes the lists at prices pi; clusters without demand (active
// false) do not bid. Each engine's bids are computed once, into scratch,
// and kept where they are within margin of the best.
func (bl *bidLists) build(m *model, pi []float64, active func(c int) bool) {
	bl.margin = bidMarginMs
	bl.ref = append(bl.ref[:0], pi...)
	bl.eStart = append(bl.eStart[:0], 0)
	bl.eSlot = bl.eSlot[:0]
	bl.on = resize(bl.on, m.nc)
	for c := range m.nc {
		bl.on[c] = active(c)
	}
	for e := range m.ne {
		lo, hi := m.eStart[e], m.eStart[e+1]
		bids := resize(bl.bid, int(hi-lo))
		bl.bid = bids
		top := math.Inf(-1)
		for i, c := range m.slotClu[lo:hi] {
			v := math.Inf(-1)
			if bl.on[c] {
				v = pi[c] - m.slotNet[lo+int32(i)]
			}
			bids[i] = v
			top = max(top, v)
		}
		floor := top - bl.margin
		for i, v := range bids {
			// -Inf ≥ -Inf: an engine no active cluster reaches lists none.
			if v >= floor && !math.IsInf(v, -1) {
				bl.eSlot = append(bl.eSlot, lo+int32(i))
			}
		}
		bl.eStart = append(bl.eStart, int32(len(bl.eSlot)))
	}
	bl.cStart = resize(bl.cStart, m.nc+1)
	clear(bl.cStart)
	for _, k := range bl.eSlot {
		bl.cStart[m.slotClu[k]+1]++
	}
	for c := range m.nc {
		bl.cStart[c+1] += bl.cStart[c]
	}
	bl.cEng = resize(bl.cEng, len(bl.eSlot))
	bl.fill = append(bl.fill[:0], bl.cStart[:m.nc]...)
	for e := range m.ne {
		for _, k := range bl.eSlot[bl.eStart[e]:bl.eStart[e+1]] {
			c := m.slotClu[k]
			bl.cEng[bl.fill[c]] = int32(e)
			bl.fill[c]++
		}
	}
}

// engine returns the listed slots of engine e; cluster the engines
// listing cluster c.
func (bl *bidLists) engine(e int32) []int32 { return bl.eSlot[bl.eStart[e]:bl.eStart[e+1]] }
func (bl *bidLists) cluster(c int32) []int32 {
	return bl.cEng[bl.cStart[c]:bl.cStart[c+1]]
}

// room is how much further clusters' prices may move apart before the
// lists stop covering every arc that can matter.
func (bl *bidLists) room(pi []float64, active func(c int) bool) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for c, v := range pi {
		if active(c) {
			d := v - bl.ref[c]
			lo, hi = min(lo, d), max(hi, d)
		}
	}
	if math.IsInf(lo, 1) {
		return bl.margin / 2
	}
	return bl.margin/2 - (hi - lo)
}
