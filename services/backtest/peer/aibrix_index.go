package peer

// aibrixIndex is AIBrix's prefix hash table: one LRU over all blocks
// (AIBRIX_PREFIX_CACHE_BLOCK_NUMBER blocks, not per pod), each block
// listing the pods it was routed to; a block untouched for 20 minutes
// is evicted (swept every second in AIBrix; here at each lookup). An
// entry is a trace block weighing the AIBrix blocks inside it; looking a
// block up refreshes it, as the store's Get does.
type aibrixIndex struct {
	capacity int   // AIBrix blocks
	idle     int64 // ns
	size     int
	slot     hashMap
	ents     pages[aibrixEntry]
	free     []int32
	head     int32 // most recent
	tail     int32
}

type aibrixEntry struct {
	live       bool
	hash       uint64
	weight     int32
	last       int64
	pods       smallList[int32]
	prev, next int32
}

func newAIBrixIndex(capacity int, idle int64) *aibrixIndex {
	return &aibrixIndex{capacity: capacity, idle: idle, slot: newHashMap(1024), head: -1, tail: -1}
}

// get returns hash's entry, refreshed at now, or -1.
func (x *aibrixIndex) get(hash uint64, now int64) int32 {
	i, ok := x.slot.get(hash)
	if !ok {
		return -1
	}
	x.touch(i, now)
	return i
}

func (x *aibrixIndex) podsOf(i int32) []int32 { return x.ents.at(i).pods.items() }

// add records that pod holds hash (weighing weight AIBrix blocks). hint
// is hash's entry as get returned it earlier in the same pick (-1 for
// none), used only if still live for hash.
func (x *aibrixIndex) add(hash uint64, hint int32, weight int32, pod int32, now int64) {
	i := hint
	if i < 0 || !x.ents.at(i).live || x.ents.at(i).hash != hash {
		var ok bool
		if i, ok = x.slot.get(hash); !ok {
			i = x.newEntry(hash, weight)
			x.size += int(weight)
		}
	}
	x.touch(i, now)
	ent := x.ents.at(i)
	for _, p := range ent.pods.items() {
		if p == pod {
			return
		}
	}
	ent.pods.add(pod)
	for x.size > x.capacity && x.tail != i {
		x.remove(x.tail)
	}
}

// expire evicts the blocks untouched since now − idle.
func (x *aibrixIndex) expire(now int64) {
	for x.tail >= 0 && x.ents.at(x.tail).last <= now-x.idle {
		x.remove(x.tail)
	}
}

func (x *aibrixIndex) newEntry(hash uint64, weight int32) int32 {
	var i int32
	if n := len(x.free); n > 0 {
		i, x.free = x.free[n-1], x.free[:n-1]
		x.ents.at(i).pods.reset()
	} else {
		i = x.ents.push()
	}
	e := x.ents.at(i)
	e.live, e.hash, e.weight, e.prev, e.next = true, hash, weight, -1, -1
	x.slot.put(hash, i)
	x.link(i)
	return i
}

func (x *aibrixIndex) touch(i int32, now int64) {
	x.ents.at(i).last = now
	if x.head != i {
		x.unlink(i)
		x.link(i)
	}
}

func (x *aibrixIndex) link(i int32) {
	x.ents.at(i).prev, x.ents.at(i).next = -1, x.head
	if x.head >= 0 {
		x.ents.at(x.head).prev = i
	}
	x.head = i
	if x.tail < 0 {
		x.tail = i
	}
}

func (x *aibrixIndex) unlink(i int32) {
	e := x.ents.at(i)
	if e.prev >= 0 {
		x.ents.at(e.prev).next = e.next
	} else {
		x.head = e.next
	}
	if e.next >= 0 {
		x.ents.at(e.next).prev = e.prev
	} else {
		x.tail = e.prev
	}
}

func (x *aibrixIndex) remove(i int32) {
	x.ents.at(i).live = false
	x.unlink(i)
	x.size -= int(x.ents.at(i).weight)
	x.slot.del(x.ents.at(i).hash)
	x.free = append(x.free, i)
}
