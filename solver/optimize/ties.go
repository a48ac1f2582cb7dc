package optimize

import (
	"math"
	"slices"
)

// ties is the exact dual method. Its state is a point of the dual over
// cluster prices π, which is always dual feasible: every engine is
// priced at the best bid max_c(π_c − n_ce) made for it (F'(0) when no
// bid reaches that), and belongs to the bidder. Ties, the engines two or
// more clusters bid for equally and share, and clusters priced at the
// shed penalty, which shed, are kept in a forest over clusters, shared
// engines and the ground (the shed option). The clusters a tree connects
// move their prices together, by one level, since the tree's arcs fix
// their differences.
//
// A move raises or lowers one tree's level to where the dual is largest
// along it: where the tree's clusters' demand equals the load of the
// engines they own, or at a kink, where moving on would take (or give up)
// an engine another tree bids for equally, or reach the shed penalty. A
// move that ends at a kink joins the trees (the engine becomes a tie) or
// ties the cluster to the ground. When every tree balances, the flows
// follow from the forest by pruning leaves: owned engines send their
// load to their owner, shared engines split theirs along the tree. A
// negative flow means the arc's two sides should part: the arc leaves the
// forest, and each side moves on its own. Every move raises the dual, and
// the method ends when every tree balances with non-negative flows: then
// the optimality conditions hold to rounding.
type ties struct {
	m    *model
	pi   []float64 // per cluster price
	arcs []tieArc  // the forest: cluster to shared engine, or to the ground (e = -1)
	bids bidLists

	bid    []float64 // per engine: best bid (its price when at least F'(0))
	owner  []int32   // per engine: cluster of the best bid, -1 when none
	ownNet []float64 // per engine: the owner's network ms to it
	load   []float64 // per engine: Λ(bid)
	ties   []int32   // per engine: its forest arcs
	tieClu []int32   // per engine with forest arcs: one of its tied clusters

	label  []int32   // per cluster: component (lowest cluster index in it)
	ground []bool    // per component label: tied to the ground
	ownL   []float64 // per cluster: load of the engines it owns that are not tied

	queue  []int32 // component labels to revisit
	queued []bool

	moves, merges, splits, rebuilds, fullMoves int
	stuck                                      int  // moves in a row that went nowhere
	stale                                      bool // the lists are from before the last verify (fresh)

	size  []int32 // scratch: cluster counts by label
	trace func(string, ...any)

	// scratch
	members []int32
	inS     []bool
	stamp   []int32
	stampN  int32
	cand    []moveEngine
	order   []int32   // candidates: engines in the order the members name them
	treeBid []float64 // candidates: per engine, the moving tree's best bid (-Inf where not named),
	treeClu []int32   // the first member making it,
	treeNet []float64 // and its network ms
	outPi   []float64 // candidates: per cluster, its price outside the tree, -Inf inside
	// candidates: every cluster that bids is in the tree (a warm start's
	// first move, and later ones, move every cluster at once), so no
	// engine has a bid from outside and bidsFor skips the pass for it
	nobodyOut bool
	kinks     []kink
	fr        forest
	snapFr    forest    // snap's layout (fr is splitNegative's)
	price     []float64 // snap's prices by node
	over      []float64 // snap's excess over the penalty by tree
	grp       groups    // components' union-find
	grpUsed   []int32   // the nodes of grp's arcs at the last components
	changed   []int32
}

type tieArc struct {
	c, e int32
	net  float64 // network ms (0 to the ground)
}

// tieTol is the relative difference of two bids below which they are
// taken as equal: rounding after prices were set along a tree.
const tieTol = 1e-12

func newTies(m *model, pi []float64) *ties {
	x := &ties{m: m, pi: slices.Clone(pi),
		bid: make([]float64, m.ne), owner: make([]int32, m.ne), ownNet: make([]float64, m.ne), load: make([]float64, m.ne),
		ties: make([]int32, m.ne), tieClu: make([]int32, m.ne), label: make([]int32, m.nc),
		ground: make([]bool, m.nc), ownL: make([]float64, m.nc), queued: make([]bool, m.nc),
		inS: make([]bool, m.nc), stamp: make([]int32, m.ne), treeBid: make([]float64, m.ne),
		treeClu: make([]int32, m.ne), treeNet: make([]float64, m.ne)}
	for c := range m.nc {
		x.label[c] = int32(c)
	}
	for e := range x.treeBid {
		x.treeBid[e] = math.Inf(-1) // none named (candidates)
	}
	return x
}

// active reports whether cluster c takes part: clusters without demand
// neither bid nor balance.
func (x *ties) active(c int) bool { return x.m.demand[c] > 0 }

// refresh rebuilds the bid lists at the current prices, and every
// engine's owner and load.
func (x *ties) refresh() {
	x.rebuilds++
	x.bids.build(x.m, x.pi, x.active)
	x.stale = false
	x.reownAll()
}

// reownAll sets every engine's owner and load afresh from the lists.
func (x *ties) reownAll() {
	clear(x.ownL)
	for e := range x.m.ne {
		x.ownEngine(int32(e))
	}
}

// verify recomputes every engine's owner and load, for solve's last check,
// and leaves the lists as they are while they still cover (room > 0):
// the best bid for an engine, and the first bidder making it, are then
// the listed ones, so owners and loads are refresh's bit for bit, and
// only a move needs the lists refresh would have built (fresh). A
// verification that finds every tree balanced, most of them, skips a
// build (a pass over every arc).
func (x *ties) verify() {
	if x.bids.room(x.pi, x.active) <= 1e-3*x.bids.margin {
		x.refresh()
		return
	}
	x.stale = true
	x.reownAll()
}

// fresh builds the lists refresh would have built at the last
// verification, before a move reads them. The prices have not moved
// since (no move was made), and the owners and loads verify set are
// those the build would give.
func (x *ties) fresh() {
	if x.stale {
		x.rebuilds++
		x.bids.build(x.m, x.pi, x.active)
		x.stale = false
	}
}

// reown refreshes after a move beyond the lists, and queues every tree
// that gained or lost an engine.
func (x *ties) reown() {
	before := slices.Clone(x.owner)
	x.refresh()
	for e, c := range x.owner {
		if c != before[e] {
			if c >= 0 {
				x.enqueue(c)
			}
			if before[e] >= 0 {
				x.enqueue(before[e])
			}
		}
	}
}

// ownEngine sets engine e's best bid, owner and load from its listed
// bidders, and adds its load to its owner's unless it is shared. A
// shared engine stays with its tree unless someone not tied to it bids
// more beyond rounding; then its ties are dropped (the forest ties only
// best bids).
func (x *ties) ownEngine(e int32) {
	m := x.m
	best, who, wn := math.Inf(-1), int32(-1), 0.0
	clu, net := x.bids.bidders(e)
	pi := x.pi // (a local: the field was loaded again for every bidder)
	for i, c := range clu {
		if b := pi[c] - net[i]; b > best {
			best, who, wn = b, c, net[i]
		}
	}
	if x.ties[e] > 0 {
		c := x.tieClu[e]
		n := x.net(c, e)
		tb := x.pi[c] - n
		if best-tb <= tieTol*max(1, math.Abs(tb)) {
			best, who, wn = tb, c, n
		} else {
			x.untie(e)
		}
	}
	f := &m.eng[e]
	l := 0.0
	if who >= 0 && best > f.a {
		l = f.loadAtPriceFrom(best, x.load[e])
	}
	x.bid[e], x.owner[e], x.load[e], x.ownNet[e] = best, who, l, wn
	if x.ties[e] == 0 && who >= 0 {
		x.ownL[who] += l
	}
}

// disown takes engine e's load off its owner's account before e changes.
func (x *ties) disown(e int32) {
	if x.ties[e] == 0 && x.owner[e] >= 0 {
		x.ownL[x.owner[e]] -= x.load[e]
	}
}

// enqueue marks component k (by any of its clusters) for a visit.
func (x *ties) enqueue(c int32) {
	k := x.label[c]
	if !x.queued[k] {
		x.queued[k] = true
		x.queue = append(x.queue, k)
	}
}

// popSmallest takes from the queue the tree with the fewest clusters
// (lowest label on ties): small trees' moves are cheap and change the big
// trees' balance, so the big ones are moved once their small neighbours
// have settled.
func (x *ties) popSmallest() int32 {
	size := x.sizeScratch()
	best := 0
	for i, k := range x.queue {
		b := x.queue[best]
		if size[k] < size[b] || (size[k] == size[b] && k < b) {
			best = i
		}
	}
	k := x.queue[best]
	x.queue = slices.Delete(x.queue, best, best+1)
	x.queued[k] = false
	return k
}

func (x *ties) sizeScratch() []int32 {
	if x.size == nil {
		x.size = make([]int32, x.m.nc)
	}
	clear(x.size)
	for _, l := range x.label {
		x.size[l]++
	}
	return x.size
}

// membersOf lists the clusters of component k.
func (x *ties) membersOf(k int32) []int32 {
	x.members = x.members[:0]
	for c, l := range x.label {
		if l == k {
			x.members = append(x.members, int32(c))
		}
	}
	return x.members
}

// imbalance is component k's unshed demand less the load it owns (its
// members' and its shared engines').
func (x *ties) imbalance(members []int32) (g, demand float64) {
	m := x.m
	for _, c := range members {
		demand += m.demand[c]
		g += m.demand[c] - x.ownL[c]
	}
	for _, a := range x.arcs {
		if a.e >= 0 && x.inS[a.c] && x.tieClu[a.e] == a.c {
			g -= x.load[a.e]
		}
	}
	return g, demand
}

// solve runs moves and splits until every tree balances with
// non-negative flows, or maxSteps moves and splits were made. It reports
// whether it closed.
func (x *ties) solve(maxSteps int) bool {
	m := x.m
	x.components()
	x.refresh()
	for c := range m.nc {
		x.enqueue(int32(c))
	}
	verified := -1 // moves at the last full check
	for step := 0; step < maxSteps; step++ {
		if len(x.queue) == 0 {
			if x.splitNegative() {
				continue
			}
			if verified == x.moves+x.splits {
				return true
			}
			// Every tree looked balanced on owners kept up to date move
			// by move: check once more on owners computed afresh.
			verified = x.moves + x.splits
			x.verify()
			for c := range m.nc {
				x.enqueue(int32(c))
			}
			continue
		}
		k := x.popSmallest()
		if x.label[k] != k || x.ground[k] {
			continue
		}
		x.visit(k)
		if x.stuck > m.nc+100 {
			return false // degenerate: ties form and split without the dual rising
		}
	}
	return false
}

// visit moves component k if it is out of balance, or ties it at the
// kink it sits on.
func (x *ties) visit(k int32) {
	members := x.membersOf(k)
	x.markS(members, true)
	defer x.markS(members, false)
	g, demand := x.imbalance(members)
	tol := 1e-12 * demand
	if demand == 0 || math.Abs(g) <= tol {
		return
	}
	x.fresh()
	room := x.bids.room(x.pi, x.active)
	if room < 1e-3*x.bids.margin {
		x.refresh()
		room = x.bids.room(x.pi, x.active)
	}
	// Most moves are short: first look only at the engines a move of
	// tieWindowMs can reach, and over the whole room only if the move
	// runs to the window's end (tieWindowMs).
	win := min(room, tieWindowMs)
	x.candidates(members, win)
	if x.trace != nil {
		x.trace("visit %d %v: g %.9g slope- %.9g slope+ %.9g pi0 %.12g", k, members, g, x.slope(members, 0, false), x.slope(members, 0, true), x.pi[members[0]])
		for _, ce := range x.cand {
			if ce.b >= ce.o-1 {
				x.trace("   cand e%d c%d b %.12g oc%d o %.12g load %.6g owner %d ties %d", ce.e, ce.c, ce.b, ce.oc, ce.o, x.load[ce.e], x.owner[ce.e], x.ties[ce.e])
			}
		}
	}
	r, ok := x.move(members, tol, win)
	if ok && win < room && r.kinkAt == -1 && r.t != 0 && math.Abs(r.t) >= win {
		x.pick(room) // (nothing moved since the gather)
		r, ok = x.move(members, tol, room)
	}
	if ok && r.kinkAt == -1 && r.t != 0 && math.Abs(r.t) >= x.bids.room(x.pi, x.active) {
		// The move runs past what the lists cover: redo it over every arc.
		x.fullMoves++
		x.candidatesFull(members)
		r, ok = x.move(members, tol, math.Inf(1))
		if ok {
			x.apply(k, members, r)
			x.reown()
			return
		}
	}
	if !ok {
		kink := x.stationaryKink(members, tol)
		if kink == nil {
			return
		}
		r = *kink
	}
	x.apply(k, members, r)
}

func (x *ties) markS(members []int32, v bool) {
	for _, c := range members {
		x.inS[c] = v
	}
}

// tieWindowMs bounds the first look of a tie move (visit). From a
// round's point, four moves in five go less than 0.3 ms and nine in ten
// less than 1 ms (the 100x1000 benchmark fleets), while the bid lists
// reach 40 ms: a tree's candidates were 150-240 engines a move, each
// with a pass over its bidders and a load at every trial level. Within
// the window the candidates left out cannot change hands (farOff), so
// a move that ends inside it is the same move bit for bit; one that
// reaches its end is made again over the whole room.
var tieWindowMs = 1.0
