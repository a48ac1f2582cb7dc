package engine

// blockIndex maps block hashes to LRU nodes. It is an open-addressing hash
// table with linear probing and backward-shift deletion (no tombstones),
// kept at most a quarter full (half full was twice as slow per block in
// BenchmarkLRUTouch: deletions shift back longer runs). The prefix cache
// inserts and evicts a block for most blocks of most requests, and this
// table is most of the engine's cost: with a Go map instead,
// BenchmarkEngine ran at half the speed.
type blockIndex struct {
	slots []indexSlot // len is a power of two, or 0
	shift uint        // 64 - log2(len(slots))
	size  int
}

type indexSlot struct {
	key  uint64
	node int32 // node+1; 0 marks an empty slot
}

// home is the slot where key's probe starts: Fibonacci hashing, which takes
// the top bits of key times 2^64/phi. It spreads sequential ids (trace
// block ids often are) evenly and costs one multiply.
func (x *blockIndex) home(key uint64) int {
	return int((key * 0x9e3779b97f4a7c15) >> x.shift)
}

func (x *blockIndex) reset() {
	clear(x.slots)
	x.size = 0
}

func (x *blockIndex) get(key uint64) (int32, bool) {
	if x.size == 0 {
		return 0, false
	}
	mask := len(x.slots) - 1
	for i := x.home(key); ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.node == 0 {
			return 0, false
		}
		if s.key == key {
			return s.node - 1, true
		}
	}
}

// put adds key, which must not be present.
func (x *blockIndex) put(key uint64, node int32) {
	if 4*(x.size+1) > len(x.slots) {
		x.grow()
	}
	mask := len(x.slots) - 1
	i := x.home(key)
	for x.slots[i].node != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = indexSlot{key: key, node: node + 1}
	x.size++
}

// remove deletes key, which must be present, and shifts back the entries
// after it that would otherwise become unreachable.
func (x *blockIndex) remove(key uint64) {
	mask := len(x.slots) - 1
	i := x.home(key)
	for x.slots[i].key != key || x.slots[i].node == 0 {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; x.slots[j].node != 0; j = (j + 1) & mask {
		// Move j into the hole at i unless j's home lies cyclically in (i, j].
		if h := x.home(x.slots[j].key); (j-h)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = indexSlot{}
	x.size--
}

// reserve makes room for n keys without growing, if the index is empty.
func (x *blockIndex) reserve(n int) {
	size := max(16, len(x.slots))
	for size < 4*n {
		size *= 2
	}
	if x.size == 0 && size > len(x.slots) {
		x.alloc(size)
	}
}

func (x *blockIndex) grow() {
	old := x.slots
	x.alloc(max(16, 2*len(old)))
	for _, s := range old {
		if s.node != 0 {
			x.put(s.key, s.node-1)
		}
	}
}

// alloc gives the index n empty slots (a power of two).
func (x *blockIndex) alloc(n int) {
	x.slots, x.size, x.shift = make([]indexSlot, n), 0, 64
	for n > 1 {
		n >>= 1
		x.shift--
	}
}
