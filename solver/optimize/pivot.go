package optimize

import (
	"math"
	"slices"
)

// dropNegative removes the tree arc with the most negative flow, if any
// is negative beyond rounding. (Dropping every negative arc at once was
// tried: the trees it leaves are far from the optimum's and the crossover
// then often runs out of changes.)
func (x *crossover) dropNegative() bool {
	worst, at := 0.0, -1
	for i, f := range x.flow {
		tol := 1e-9 * x.st.m.demand[x.edges[i].c]
		if f < -tol && f < worst {
			worst, at = f, i
		}
	}
	if at < 0 {
		return false
	}
	x.edges = slices.Delete(x.edges, at, at+1)
	return true
}

// addViolated adds the arc (or shed) most cheaper than the price of its
// cluster, if any is beyond rounding; when it closes a cycle, the cycle's
// arc that pushing flow around would empty first leaves. It looks among
// the arcs that were near tight at the last full scan, and scans every
// arc (refreshing that list) only when none of those is violated, so the
// crossover ends only after a full scan finds nothing.
func (x *crossover) addViolated() bool {
	m := x.st.m
	x.price = resize(x.price, m.ne)
	for e := range m.ne {
		x.price[e] = x.enginePrice(e)
	}
	x.viol = x.viol[:0]
	worst, add := x.worstShed()
	if x.scanned != nil {
		for _, a := range x.near {
			if v := x.violation(int(clusterOfArc(m, a)), a); v > 0 {
				x.viol = append(x.viol, violator{a, v})
				if v > worst {
					worst, add = v, x.arcEdge(a)
				}
			}
		}
	}
	if worst == 0 && x.drift() >= crossoverNearMs/2 {
		// An arc left off the near list had reduced cost at least the
		// margin at the last full scan, and can have lost at most twice
		// the largest price move since: only past half the margin can it
		// be violated.
		x.scanned = append(x.scanned[:0], x.pot[:m.nc]...)
		x.scanned = append(x.scanned, x.price...)
		x.near = x.near[:0]
		for c, d := range m.demand {
			if d == 0 {
				continue
			}
			lo, hi := m.arcs(c)
			for a := int32(lo); a < int32(hi); a++ {
				v := x.violation(c, a)
				if v > 0 {
					x.viol = append(x.viol, violator{a, v})
				}
				if v > worst {
					worst, add = v, x.arcEdge(a)
				}
				if v > -crossoverNearMs {
					x.near = append(x.near, a)
				}
			}
		}
	}
	if worst == 0 {
		return false
	}
	if x.comp[add.c] == x.comp[add.to] {
		x.breakCycle(int(add.c), int(add.to))
	}
	x.edges = append(x.edges, add)
	x.mergeMore(add)
	return true
}

type violator struct {
	arc int32
	v   float64
}

// maxMerges bounds the extra arcs one pass of the crossover adds.
const maxMerges = 64

// mergeMore adds, after first, more violated arcs in order of violation,
// but only ones that join two different trees: such an arc closes no
// cycle, so it needs no ratio test on flows the first change made stale.
// It saves a solve of every tree per arc when many trees must join.
func (x *crossover) mergeMore(first xEdge) {
	if len(x.viol) < 2 {
		return
	}
	slices.SortFunc(x.viol, func(a, b violator) int {
		if c := cmpFloat(b.v, a.v); c != 0 {
			return c
		}
		return int(a.arc - b.arc)
	})
	g := newGroups(x.nodes)
	g.union(x.comp[first.c], x.comp[first.to])
	added := 0
	for _, vi := range x.viol {
		e := x.arcEdge(vi.arc)
		a, b := g.find(x.comp[e.c]), g.find(x.comp[e.to])
		if a == b {
			continue
		}
		g.union(a, b)
		x.edges = append(x.edges, e)
		if added++; added == maxMerges {
			return
		}
	}
}

// crossoverNearMs is how close to tight an arc must be at a full scan to
// be watched until the next one.
const crossoverNearMs = 5.0

// drift is the largest price move of any node since the last full scan,
// or +Inf before the first.
func (x *crossover) drift() float64 {
	if x.scanned == nil {
		return math.Inf(1)
	}
	m := x.st.m
	d := 0.0
	for c := range m.nc {
		d = max(d, math.Abs(x.pot[c]-x.scanned[c]))
	}
	for e, p := range x.price {
		d = max(d, math.Abs(p-x.scanned[m.nc+e]))
	}
	return d
}

// violation is how much cheaper arc a is than its cluster's price, beyond
// rounding; 0 or less when it is not.
func (x *crossover) violation(c int, a int32) float64 {
	m := x.st.m
	v := x.pot[c] - m.arcNet[a] - x.price[m.arcEng[a]]
	if m.demand[c] == 0 || v <= 1e-9*math.Abs(x.pot[c]) {
		return min(v, 0)
	}
	return v
}

// worstShed finds the cluster priced most above the shed penalty.
func (x *crossover) worstShed() (float64, xEdge) {
	m := x.st.m
	worst, add := 0.0, xEdge{}
	for c, d := range m.demand {
		if v := x.pot[c] - m.penalty; d > 0 && v > 1e-9*math.Abs(x.pot[c]) && v > worst {
			worst, add = v, xEdge{int32(c), int32(x.ground), -1, 0}
		}
	}
	return worst, add
}

func (x *crossover) arcEdge(a int32) xEdge {
	m := x.st.m
	return xEdge{clusterOfArc(m, a), int32(m.nc) + m.arcEng[a], m.arcSlot[a], m.arcNet[a]}
}

// enginePrice is an engine's price: its tree's, or F'(0) when unused.
func (x *crossover) enginePrice(e int) float64 {
	if v := x.st.m.nc + e; x.adjStart[v] == x.adjStart[v+1] {
		return x.st.m.eng[e].a
	}
	return x.pot[x.st.m.nc+e]
}

// breakCycle removes, from the cycle that a new arc from cluster c to
// node to closes, the tree arc that pushing flow around the cycle (more
// along the new arc) would empty first: of the path arcs whose flow falls,
// the one with least flow, as in the simplex ratio test.
func (x *crossover) breakCycle(c, to int) {
	depth := func(n int) int {
		d := 0
		for x.parent[n] >= 0 {
			n = x.other(x.parent[n], n)
			d++
		}
		return d
	}
	weakest, at := math.Inf(1), -1
	consider := func(ei int32, falls bool) {
		if f := x.flow[ei]; falls && f < weakest {
			weakest, at = f, int(ei)
		}
	}
	// The cycle runs c → to → (tree path) → c. Walking up from to, an arc
	// is crossed child to parent; walking up from c, parent to child. An
	// arc's flow (cluster to engine) falls when the cycle crosses it from
	// its engine end to its cluster end.
	u, v := to, c
	du, dv := depth(u), depth(v)
	up := func(n int, fromChild bool) int {
		ei := x.parent[n]
		e := x.edges[ei]
		if fromChild {
			consider(ei, n != int(e.c)) // crossed from n up: falls if n is the engine end
		} else {
			consider(ei, n == int(e.c)) // crossed down to n: falls if n is the cluster end
		}
		return x.other(ei, n)
	}
	for du > dv {
		u, du = up(u, true), du-1
	}
	for dv > du {
		v, dv = up(v, false), dv-1
	}
	for u != v {
		u, v = up(u, true), up(v, false)
	}
	if at >= 0 {
		x.edges = slices.Delete(x.edges, at, at+1)
	}
}

func (x *crossover) other(ei int32, n int) int {
	e := x.edges[ei]
	if int(e.c) == n {
		return int(e.to)
	}
	return int(e.c)
}
