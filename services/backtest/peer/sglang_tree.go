package peer

import "container/heap"

// sglangTree is SGLang's approximate radix tree over the routing text,
// kept at the trace's block level: a node is a trace block (ids are
// prefix-chained, so an id names the whole prefix up to it), weighing
// its tokens × charsPerToken characters; every tenant (worker) that
// inserted a text through a node holds it, with the time it last did. A
// tenant's size is the characters of the nodes it holds, which is what
// max_tree_size bounds and what "the smallest tree" compares.
type sglangTree struct {
	nodes hashMap // block -> node
	ns    pages[treeNode]
	free  []int32
	size  []int64 // by tenant, characters held
	seed  uint64
}

type treeNode struct {
	hash    uint64
	parent  int32 // -1 for a first block
	chars   int32
	tenants smallList[treeTenant]
}

type treeTenant struct {
	tenant int32
	kids   int32 // children of the node this tenant holds
	last   int64 // last insert through the node, ns
}

func newSGLangTree(tenants int, seed uint64) *sglangTree {
	return &sglangTree{nodes: newHashMap(1024), size: make([]int64, tenants), seed: seed}
}

// order is a node's arbitrary but fixed preference among its tenants:
// SGLang returns "the first" tenant of the matched node's DashMap, whose
// iteration order is a hash order of its own.
func (t *sglangTree) order(hash uint64, tenant int32) uint64 {
	return mix64(t.seed ^ hash ^ uint64(tenant)*0x9e3779b97f4a7c15)
}

// match walks the request's blocks down the tree and returns the
// characters matched, the tenant of the deepest matched node (-1 if none)
// and, in found, the node of each block walked (-1 past the match).
func (t *sglangTree) match(blocks []uint64, chars func(k int) int32, found []int32) (int64, int32) {
	matched, tenant := int64(0), int32(-1)
	for k, h := range blocks {
		i, ok := t.nodes.get(h)
		if !ok || t.ns.at(i).tenants.len() == 0 {
			break
		}
		found[k] = i
		matched += int64(chars(k))
		best := uint64(0)
		for j, x := range t.ns.at(i).tenants.items() {
			if o := t.order(h, x.tenant); j == 0 || o < best {
				best, tenant = o, x.tenant
			}
		}
	}
	return matched, tenant
}

// insert adds the request's blocks for tenant at now; found are the
// nodes match returned (-1 where it did not reach).
func (t *sglangTree) insert(blocks []uint64, chars func(k int) int32, found []int32, tenant int32, now int64) {
	parent := int32(-1)
	for k, h := range blocks {
		i := found[k]
		if i < 0 {
			var ok bool
			if i, ok = t.nodes.get(h); !ok {
				i = t.newNode(h, parent, chars(k))
			}
		}
		t.hold(i, tenant, now)
		parent = i
	}
}

func (t *sglangTree) newNode(h uint64, parent int32, chars int32) int32 {
	var i int32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
		t.ns.at(i).tenants.reset()
	} else {
		i = t.ns.push()
	}
	n := t.ns.at(i)
	n.hash, n.parent, n.chars = h, parent, chars
	t.nodes.put(h, i)
	return i
}

// hold makes tenant hold node i, last used at now.
func (t *sglangTree) hold(i, tenant int32, now int64) {
	n := t.ns.at(i)
	ts := n.tenants.items()
	for j := range ts {
		if ts[j].tenant == tenant {
			ts[j].last = now
			return
		}
	}
	n.tenants.add(treeTenant{tenant: tenant, last: now})
	t.size[tenant] += int64(n.chars)
	if n.parent >= 0 {
		t.kid(n.parent, tenant, 1)
	}
}

// kid changes tenant's child count at node i by d.
func (t *sglangTree) kid(i, tenant int32, d int32) {
	ts := t.ns.at(i).tenants.items()
	for j := range ts {
		if ts[j].tenant == tenant {
			ts[j].kids += d
			return
		}
	}
}

// smallest is the tenant with the fewest characters, ties in the tree's
// fixed arbitrary order.
func (t *sglangTree) smallest() int32 {
	best := int32(0)
	for k := range t.size {
		w := int32(k)
		if t.size[w] < t.size[best] || (t.size[w] == t.size[best] && t.order(0, w) < t.order(0, best)) {
			best = w
		}
	}
	return best
}

// evict removes, for every tenant above max characters, its least
// recently used leaves until it is within max (evict_tenant_by_size).
func (t *sglangTree) evict(max int64) {
	for w := range t.size {
		if t.size[w] > max {
			t.evictTenant(int32(w), max)
		}
	}
}

func (t *sglangTree) evictTenant(w int32, max int64) {
	var h leafHeap
	for i := range int32(t.ns.len()) {
		if j := t.ns.at(i).find(w); j >= 0 && t.ns.at(i).tenants.items()[j].kids == 0 {
			h = append(h, leaf{node: i, last: t.ns.at(i).tenants.items()[j].last})
		}
	}
	heap.Init(&h)
	for t.size[w] > max && h.Len() > 0 {
		l := heap.Pop(&h).(leaf)
		parent := t.ns.at(l.node).parent
		t.drop(l.node, w)
		if parent >= 0 {
			if j := t.ns.at(parent).find(w); j >= 0 && t.ns.at(parent).tenants.items()[j].kids == 0 {
				heap.Push(&h, leaf{node: parent, last: t.ns.at(parent).tenants.items()[j].last})
			}
		}
	}
}

func (n *treeNode) find(w int32) int {
	for j, x := range n.tenants.items() {
		if x.tenant == w {
			return j
		}
	}
	return -1
}

// drop removes tenant w from leaf i, and the node once nobody holds it.
func (t *sglangTree) drop(i, w int32) {
	n := t.ns.at(i)
	n.tenants.del(n.find(w))
	t.size[w] -= int64(n.chars)
	if n.parent >= 0 {
		t.kid(n.parent, w, -1)
	}
	if n.tenants.len() == 0 {
		t.nodes.del(n.hash)
		t.free = append(t.free, i)
	}
}

type leaf struct {
	node int32
	last int64
}

type leafHeap []leaf

func (h leafHeap) Len() int { return len(h) }
func (h leafHeap) Less(a, b int) bool {
	return h[a].last < h[b].last || (h[a].last == h[b].last && h[a].node < h[b].node)
}
func (h leafHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *leafHeap) Push(x any)   { *h = append(*h, x.(leaf)) }
func (h *leafHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mix64 is SplitMix64's finaliser: a fixed, well-spread hash of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
