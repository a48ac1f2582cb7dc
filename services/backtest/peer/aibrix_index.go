package peer

// aibrixIndex is AIBrix's prefix hash table: one LRU over all blocks
// (AIBRIX_PREFIX_CACHE_BLOCK_NUMBER blocks, not per pod), each block
// listing the pods it was routed to; a block untouched for 20 minutes
// is evicted (swept every second in AIBrix; here at each lookup). An
// entry is a trace block weighing the AIBrix blocks inside it; looking a
// block up refreshes it, as the store's Get does. The LRU order is kept
// as a log of stamped uses (see holderIndex).
type aibrixIndex struct {
	capacity int   // AIBrix blocks
	idle     int64 // ns
	size     int
	slot     hashMap
	ents     pages[aibrixEntry]
	free     []int32
	recs     queue[holderRec] // uses, oldest first
	stamp    uint64
}

type aibrixEntry struct {
	live   bool
	hash   uint64
	weight int32
	stamp  uint64 // of its latest use
	last   int64  // time of its latest use
	pods   smallList[int32]
}

func newAIBrixIndex(capacity int, idle int64) *aibrixIndex {
	return &aibrixIndex{capacity: capacity, idle: idle, slot: newHashMap(1024)}
}

// reserve sizes the index for the entries it will likely hold, so that
// it does not grow from empty in every run: blocks, the distinct blocks
// it will see (0: unknown), or as many as its capacity holds at full
// weight, the AIBrix blocks in a full trace block (only a prompt's last
// trace block weighs less). More entries would grow it as before.
func (x *aibrixIndex) reserve(blocks, full int) {
	x.slot.reserve(min(blocks, x.capacity/max(full, 1)+1))
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
	for x.size > x.capacity {
		if !x.evictOldest(i) {
			break
		}
	}
}

// expire evicts the blocks untouched since now − idle.
func (x *aibrixIndex) expire(now int64) {
	for x.recs.len() > 0 {
		r := x.recs.at(0)
		e := x.ents.at(r.entry)
		if e.live && e.stamp == r.stamp && e.last > now-x.idle {
			return // the least recently used block is still fresh
		}
		x.recs.pop()
		if e.live && e.stamp == r.stamp {
			x.remove(r.entry)
		}
	}
}

// evictOldest removes the least recently used block, unless it is keep;
// it reports whether it removed one.
func (x *aibrixIndex) evictOldest(keep int32) bool {
	for x.recs.len() > 0 {
		r := x.recs.at(0)
		e := x.ents.at(r.entry)
		if !e.live || e.stamp != r.stamp {
			x.recs.pop()
			continue
		}
		if r.entry == keep {
			return false
		}
		x.recs.pop()
		x.remove(r.entry)
		return true
	}
	return false
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
	e.live, e.hash, e.weight = true, hash, weight
	x.slot.put(hash, i)
	return i
}

func (x *aibrixIndex) touch(i int32, now int64) {
	x.stamp++
	e := x.ents.at(i)
	e.stamp, e.last = x.stamp, now
	x.recs.push(holderRec{entry: i, stamp: x.stamp})
	if live := x.slot.len(); x.recs.len() > 4*live+1024 {
		x.compact()
	}
}

// compact keeps only the current records.
func (x *aibrixIndex) compact() {
	x.recs.filter(func(r holderRec) bool {
		e := x.ents.at(r.entry)
		return e.live && e.stamp == r.stamp
	})
}

func (x *aibrixIndex) remove(i int32) {
	e := x.ents.at(i)
	e.live = false
	x.size -= int(e.weight)
	x.slot.del(e.hash)
	x.free = append(x.free, i)
}
