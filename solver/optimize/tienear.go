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
	eStart []int32   // engine e's listed arcs: eClu, eNet[eStart[e]:eStart[e+1]]
	eClu   []int32   // per listed arc: its cluster (m.slotClu, packed)
	eNet   []float64 // per listed arc: its network ms (m.slotNet, packed)
	cStart []int32   // cluster c's engines: cEng[cStart[c]:cStart[c+1]]
	cEng   []int32
	cNet   []float64 // network ms of cEng's arcs
	fill   []int32   // scratch
	on     []float64 // scratch: per cluster, its price, or -Inf when it does not bid
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
	// eClu and eNet are written by index into room for every slot, not
	// appended to: the calls to grow them kept the loops' values on the
	// stack.
	nslot := len(m.slotClu)
	eClu, eNet := bl.eClu[:cap(bl.eClu)], bl.eNet[:cap(bl.eNet)]
	if len(eClu) < nslot {
		eClu = make([]int32, nslot)
	}
	if len(eNet) < nslot {
		eNet = make([]float64, nslot)
	}
	listed := 0
	bl.on = resize(bl.on, m.nc)
	for c := range m.nc {
		// A cluster that does not bid bids -Inf for every engine (its
		// network times are finite).
		bl.on[c] = math.Inf(-1)
		if active(c) {
			bl.on[c] = pi[c]
		}
	}
	on := bl.on // (locals here and below: fields are loaded again in every pass)
	for e := range m.ne {
		lo, hi := m.eStart[e], m.eStart[e+1]
		bids := resize(bl.bid, int(hi-lo))
		bl.bid = bids
		top := math.Inf(-1)
		nets := m.slotNet[lo:hi]
		for i, c := range m.slotClu[lo:hi] {
			v := on[c] - nets[i]
			bids[i] = v
			if v > top { // (not max: no NaN or signed zero to order here)
				top = v
			}
		}
		// An engine no active cluster reaches (top -Inf) lists none;
		// otherwise the floor is finite and leaves out every -Inf.
		if !math.IsInf(top, -1) {
			listed = listOver(top-bl.margin, bids, m.slotClu[lo:hi], nets, eClu, eNet, listed)
		}
		bl.eStart = append(bl.eStart, int32(listed))
	}
	bl.eClu, bl.eNet = eClu[:listed], eNet[:listed]
	bl.cStart = resize(bl.cStart, m.nc+1)
	clear(bl.cStart)
	for _, c := range bl.eClu {
		bl.cStart[c+1]++
	}
	for c := range m.nc {
		bl.cStart[c+1] += bl.cStart[c]
	}
	bl.cEng = resize(bl.cEng, len(bl.eClu))
	bl.cNet = resize(bl.cNet, len(bl.eClu))
	bl.fill = append(bl.fill[:0], bl.cStart[:m.nc]...)
	fill, cEng, cNet, eClu, eNet := bl.fill, bl.cEng, bl.cNet, bl.eClu, bl.eNet
	for e := range m.ne {
		for i := bl.eStart[e]; i < bl.eStart[e+1]; i++ {
			c := eClu[i]
			cEng[fill[c]], cNet[fill[c]] = int32(e), eNet[i]
			fill[c]++
		}
	}
}

// listOver writes into eClu and eNet from listed on the clusters and
// network ms of the bids at least floor, and returns the new count listed.
func listOver(floor float64, bids []float64, clu []int32, nets []float64, eClu []int32, eNet []float64, listed int) int {
	clu, nets = clu[:len(bids)], nets[:len(bids)]
	eNet = eNet[:len(eClu)]
	for i, v := range bids {
		if v >= floor {
			eClu[listed], eNet[listed] = clu[i], nets[i]
			listed++
		}
	}
	return listed
}

// bidders returns engine e's listed clusters and their network times,
// packed so that a pass over them reads two short arrays in order instead
// of the model's slot arrays at scattered places.
func (bl *bidLists) bidders(e int32) (clu []int32, net []float64) {
	lo, hi := bl.eStart[e], bl.eStart[e+1]
	return bl.eClu[lo:hi], bl.eNet[lo:hi]
}

// clusterArcs returns the engines listing cluster c and its network times
// to them.
func (bl *bidLists) clusterArcs(c int32) (engines []int32, net []float64) {
	lo, hi := bl.cStart[c], bl.cStart[c+1]
	return bl.cEng[lo:hi], bl.cNet[lo:hi]
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
