package peer

// holderIndex is a prefix index kept by a router: for each block hash,
// the engines it believes hold the block, with one least-recently-used
// list per engine bounding how many blocks it believes each holds. It is
// llm-d's approximate prefix index (an LRU per server, a hash → servers
// table); evicting a hash from an engine's LRU removes the engine from
// the hash's holders, and a hash no engine holds leaves the table.
//
// Holders of a block are few (a conversation's blocks live on the one
// or two engines it went to; only shared system prompts are everywhere),
// so each block keeps a short list of (engine, LRU node) pairs, and a
// lookup costs one map access per block whatever the fleet size.
type holderIndex struct {
	slot  hashMap // block hash -> entry
	ents  []holderEntry
	free  []int32 // released entries
	lists []holderLRU
}

// holderEntry keeps up to two holders inline (most blocks have one), and
// moves them to more when a third comes.
type holderEntry struct {
	hash   uint64
	n      int32
	inline [2]holder
	more   []holder
}

func (h *holderEntry) list() []holder {
	if int(h.n) <= len(h.inline) {
		return h.inline[:h.n]
	}
	return h.more
}

func (h *holderEntry) append(x holder) {
	switch {
	case int(h.n) < len(h.inline):
		h.inline[h.n] = x
	case int(h.n) == len(h.inline):
		h.more = append(append(h.more[:0], h.inline[:]...), x)
	default:
		h.more = append(h.more, x)
	}
	h.n++
}

// delete removes holder k of the list.
func (h *holderEntry) delete(k int) {
	l := h.list()
	l[k] = l[len(l)-1]
	h.n--
	if int(h.n) == len(h.inline) {
		copy(h.inline[:], h.more)
	} else if int(h.n) > len(h.inline) {
		h.more = h.more[:h.n]
	}
}

type holder struct {
	engine int32
	node   int32
}

// holderLRU is one engine's LRU: nodes linked by index, most recent at
// head.
type holderLRU struct {
	nodes      []holderNode
	free       []int32
	head, tail int32
	size, cap  int
}

type holderNode struct {
	entry      int32
	prev, next int32
}

func newHolderIndex(capacity []int) *holderIndex {
	total := 0
	for _, c := range capacity {
		total += max(c, 1)
	}
	// Room for the blocks the index will hold once warm (up to a bound),
	// so that it does not grow by doubling, copying, while it warms up.
	hint := min(total, 1<<16)
	x := &holderIndex{slot: newHashMap(hint), ents: make([]holderEntry, 0, hint),
		lists: make([]holderLRU, len(capacity))}
	for e, c := range capacity {
		x.lists[e] = holderLRU{head: -1, tail: -1, cap: max(c, 1)}
	}
	return x
}

// holders returns the engines holding hash (nil when none). The slice is
// the index's own: read it before the next change.
func (x *holderIndex) holders(hash uint64) []holder {
	if i, ok := x.slot.get(hash); ok {
		return x.ents[i].list()
	}
	return nil
}

// entry returns hash's entry, -1 when no engine holds it.
func (x *holderIndex) entry(hash uint64) int32 {
	if i, ok := x.slot.get(hash); ok {
		return i
	}
	return -1
}

// holdersOf returns entry i's holders (i from entry, >= 0).
func (x *holderIndex) holdersOf(i int32) []holder { return x.ents[i].list() }

// add records that engine e holds hash, as its most recent block.
func (x *holderIndex) add(hash uint64, e int) { x.addAt(hash, -1, e) }

// addAt is add with hash's entry as entry returned it before (a hint that
// saves the lookup; -1 for none): it is used only while it still holds
// hash, since evictions in between may have released it.
func (x *holderIndex) addAt(hash uint64, hint int32, e int) {
	i := hint
	if i < 0 || x.ents[i].n == 0 || x.ents[i].hash != hash {
		var ok bool
		if i, ok = x.slot.get(hash); !ok {
			i = x.newEntry(hash)
		}
	}
	l := &x.lists[e]
	for _, h := range x.ents[i].list() {
		if int(h.engine) == e {
			l.moveToFront(h.node)
			return
		}
	}
	if l.size == l.cap {
		x.evict(e)
	}
	n := l.push(i)
	x.ents[i].append(holder{engine: int32(e), node: n})
}

func (x *holderIndex) newEntry(hash uint64) int32 {
	var i int32
	if k := len(x.free); k > 0 {
		i, x.free = x.free[k-1], x.free[:k-1]
		x.ents[i] = holderEntry{hash: hash, more: x.ents[i].more[:0]}
	} else {
		i = int32(len(x.ents))
		x.ents = append(x.ents, holderEntry{hash: hash})
	}
	x.slot.put(hash, i)
	return i
}

// evict drops engine e's least recently used block.
func (x *holderIndex) evict(e int) {
	l := &x.lists[e]
	n := l.tail
	i := l.nodes[n].entry
	l.remove(n)
	ent := &x.ents[i]
	for k, h := range ent.list() {
		if int(h.engine) == e {
			ent.delete(k)
			break
		}
	}
	if ent.n == 0 {
		x.slot.del(x.ents[i].hash)
		x.free = append(x.free, i)
	}
}

func (l *holderLRU) push(entry int32) int32 {
	var n int32
	if k := len(l.free); k > 0 {
		n, l.free = l.free[k-1], l.free[:k-1]
	} else {
		n = int32(len(l.nodes))
		l.nodes = append(l.nodes, holderNode{})
	}
	l.nodes[n] = holderNode{entry: entry, prev: -1, next: l.head}
	if l.head >= 0 {
		l.nodes[l.head].prev = n
	}
	l.head = n
	if l.tail < 0 {
		l.tail = n
	}
	l.size++
	return n
}

func (l *holderLRU) unlink(n int32) {
	nd := &l.nodes[n]
	if nd.prev >= 0 {
		l.nodes[nd.prev].next = nd.next
	} else {
		l.head = nd.next
	}
	if nd.next >= 0 {
		l.nodes[nd.next].prev = nd.prev
	} else {
		l.tail = nd.prev
	}
}

func (l *holderLRU) remove(n int32) {
	l.unlink(n)
	l.free = append(l.free, n)
	l.size--
}

func (l *holderLRU) moveToFront(n int32) {
	if l.head == n {
		return
	}
	l.unlink(n)
	l.nodes[n].prev, l.nodes[n].next = -1, l.head
	l.nodes[l.head].prev = n
	l.head = n
	if l.tail < 0 {
		l.tail = n
	}
}
