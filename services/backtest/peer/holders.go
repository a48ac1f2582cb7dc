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
	ents  pages[holderEntry]
	free  []int32 // released entries
	lists []holderLRU
}

type holderEntry struct {
	hash    uint64
	holders smallList[holder]
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
	hint := min(total, 4096)
	x := &holderIndex{slot: newHashMap(hint), lists: make([]holderLRU, len(capacity))}
	for e, c := range capacity {
		x.lists[e] = holderLRU{head: -1, tail: -1, cap: max(c, 1)}
	}
	return x
}

// holders returns the engines holding hash (nil when none). The slice is
// the index's own: read it before the next change.
func (x *holderIndex) holders(hash uint64) []holder {
	if i, ok := x.slot.get(hash); ok {
		return x.ents.at(i).holders.items()
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
func (x *holderIndex) holdersOf(i int32) []holder { return x.ents.at(i).holders.items() }

// add records that engine e holds hash, as its most recent block.
func (x *holderIndex) add(hash uint64, e int) { x.addAt(hash, -1, e) }

// addAt is add with hash's entry as entry returned it before (a hint that
// saves the lookup; -1 for none): it is used only while it still holds
// hash, since evictions in between may have released it.
func (x *holderIndex) addAt(hash uint64, hint int32, e int) {
	i := hint
	if i < 0 || x.ents.at(i).holders.len() == 0 || x.ents.at(i).hash != hash {
		var ok bool
		if i, ok = x.slot.get(hash); !ok {
			i = x.newEntry(hash)
		}
	}
	l := &x.lists[e]
	for _, h := range x.ents.at(i).holders.items() {
		if int(h.engine) == e {
			l.moveToFront(h.node)
			return
		}
	}
	if l.size == l.cap {
		x.evict(e)
	}
	n := l.push(i)
	x.ents.at(i).holders.add(holder{engine: int32(e), node: n})
}

func (x *holderIndex) newEntry(hash uint64) int32 {
	var i int32
	if k := len(x.free); k > 0 {
		i, x.free = x.free[k-1], x.free[:k-1]
		x.ents.at(i).holders.reset()
	} else {
		i = x.ents.push()
	}
	x.ents.at(i).hash = hash
	x.slot.put(hash, i)
	return i
}

// evict drops engine e's least recently used block.
func (x *holderIndex) evict(e int) {
	l := &x.lists[e]
	n := l.tail
	i := l.nodes[n].entry
	l.remove(n)
	ent := x.ents.at(i)
	for k, h := range ent.holders.items() {
		if int(h.engine) == e {
			ent.holders.del(k)
			break
		}
	}
	if ent.holders.len() == 0 {
		x.slot.del(ent.hash)
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
