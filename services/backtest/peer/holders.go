package peer

// holderIndex is a prefix index kept by a router: for each block hash,
// the engines it believes hold the block, with one least-recently-used
// order per engine bounding how many blocks it believes each holds. It is
// llm-d's approximate prefix index (an LRU per server, a hash → servers
// table); evicting a hash from an engine's LRU removes the engine from
// the hash's holders, and a hash no engine holds leaves the table.
//
// Holders of a block are few (a conversation's blocks live on the one
// or two engines it went to; only shared system prompts are everywhere),
// so each block keeps a short inline list of (engine, stamp) pairs, and
// a lookup costs one table access per block whatever the fleet size.
//
// The LRU order is exact but kept without a linked list, whose pointer
// chasing was most of the index's cost: every use of a (block, engine)
// pair gets a fresh stamp and appends a record to the engine's log, so
// the engine's least recently used pair is its oldest record whose stamp
// is still the pair's own; older records of refreshed pairs are skipped.
type holderIndex struct {
	slot  hashMap // block hash -> entry
	ents  pages[holderEntry]
	free  []int32
	lists []holderLog
	stamp uint64
}

type holderEntry struct {
	hash    uint64
	holders smallList[holder]
}

type holder struct {
	engine int32
	stamp  uint64 // of its latest use
}

// holderLog is one engine's uses, oldest first, and how many blocks the
// engine holds against its capacity.
type holderLog struct {
	recs      queue[holderRec]
	size, cap int
}

type holderRec struct {
	entry int32
	stamp uint64
}

func newHolderIndex(capacity []int) *holderIndex {
	total := 0
	for _, c := range capacity {
		total += max(c, 1)
	}
	x := &holderIndex{slot: newHashMap(min(total, 4096)), lists: make([]holderLog, len(capacity))}
	for e, c := range capacity {
		x.lists[e].cap = max(c, 1)
	}
	return x
}

// reserve sizes the index for up to blocks entries (0: unknown), at most
// one per block the engines can hold together (and one that comes in
// before an eviction), so that it does not grow from empty in every run.
func (x *holderIndex) reserve(blocks int) {
	total := 0
	for _, l := range x.lists {
		total += l.cap
	}
	x.slot.reserve(min(blocks, total+1))
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
	x.stamp++
	l := &x.lists[e]
	hs := x.ents.at(i).holders.items()
	found := false
	for k := range hs {
		if int(hs[k].engine) == e {
			hs[k].stamp, found = x.stamp, true
			break
		}
	}
	l.recs.push(holderRec{entry: i, stamp: x.stamp})
	if found {
		x.compact(e)
		return
	}
	x.ents.at(i).holders.add(holder{engine: int32(e), stamp: x.stamp})
	if l.size++; l.size > l.cap {
		x.evict(e)
	}
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

// evict drops engine e's least recently used block: its oldest record
// that is still current.
func (x *holderIndex) evict(e int) {
	l := &x.lists[e]
	for l.recs.len() > 0 {
		r := l.recs.at(0)
		l.recs.pop()
		ent := x.ents.at(r.entry)
		for k, h := range ent.holders.items() {
			if int(h.engine) == e && h.stamp == r.stamp {
				ent.holders.del(k)
				l.size--
				if ent.holders.len() == 0 {
					x.slot.del(ent.hash)
					x.free = append(x.free, r.entry)
				}
				x.compact(e)
				return
			}
		}
	}
}

// compact drops the stale records once they are most of the log, so
// that it stays within a small multiple of the blocks held.
func (x *holderIndex) compact(e int) {
	l := &x.lists[e]
	if l.recs.len() < 4*l.cap+64 {
		return
	}
	l.recs.filter(func(r holderRec) bool {
		for _, h := range x.ents.at(r.entry).holders.items() {
			if int(h.engine) == e && h.stamp == r.stamp {
				return true
			}
		}
		return false
	})
}
