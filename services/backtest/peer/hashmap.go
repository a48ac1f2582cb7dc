package peer

// hashMap maps block hashes to int32 values. The routers' prefix indexes
// look up every block of every request, and with a Go map those lookups
// were most of a peer policy's cost (cache misses in a large table). This
// is an open-addressing table with linear probing, grouped Fibonacci
// hashing (home) and backward-shift deletion, kept at most half full.
type hashMap struct {
	slots []hashSlot // len is a power of two, or 0
	shift uint
	group uint64 // home's group mask: 0, or groupMask from groupFrom slots
	size  int
}

type hashSlot struct {
	key uint64
	val int32 // val+1; 0 marks an empty slot
}

func newHashMap(hint int) hashMap {
	var m hashMap
	m.resize(max(16, 2*hint))
	return m
}

// home is the slot where key's probe starts: Fibonacci hashing (the top
// bits of key times 2^64/phi), which spreads sequential ids evenly. In a
// table of groupFrom slots or more, keys that differ only in their last
// groupBits bits share a group of adjacent slots, which the hash of the
// rest places: trace block ids are mostly sequential (Mooncake numbers
// blocks as it first sees them), so a request's blocks fall in a few
// groups, a few cache lines, where hashing every id apart cost a cache
// miss per block in a table larger than the cache (aibrix and sglang ran
// 30-50% faster on the Mooncake acceptance run). A smaller table stays in
// the cache, and there the denser runs of the groups only lengthened the
// probes (dynamo, whose tables are small, ran 15% slower). Hashed ids
// spread as before. Where a key sits never changes what the map holds.
func (m *hashMap) home(key uint64) int {
	h := int(((key &^ m.group) * 0x9e3779b97f4a7c15) >> m.shift)
	return h&^int(m.group) | int(key&m.group)
}

// A group is 8 slots of 16 bytes, two cache lines, in tables of 512 KiB
// or more.
const (
	groupBits = 3
	groupMask = 1<<groupBits - 1
	groupFrom = 1 << 15
)

func (m *hashMap) len() int { return m.size }

// reserve makes room for n keys in all, so that adding them does not
// resize the table; where keys sit never changes what the map holds.
func (m *hashMap) reserve(n int) {
	if 2*n > len(m.slots) {
		m.resize(2 * n)
	}
}

func (m *hashMap) get(key uint64) (int32, bool) {
	if m.size == 0 {
		return 0, false
	}
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.val == 0 {
			return 0, false
		}
		if s.key == key {
			return s.val - 1, true
		}
	}
}

// put sets key's value, adding key if absent.
func (m *hashMap) put(key uint64, val int32) {
	if 2*(m.size+1) > len(m.slots) {
		m.resize(2 * len(m.slots))
	}
	mask := len(m.slots) - 1
	i := m.home(key)
	for m.slots[i].val != 0 && m.slots[i].key != key {
		i = (i + 1) & mask
	}
	if m.slots[i].val == 0 {
		m.size++
	}
	m.slots[i] = hashSlot{key: key, val: val + 1}
}

// del removes key, if present, shifting back the entries after it that
// would otherwise become unreachable.
func (m *hashMap) del(key uint64) {
	if m.size == 0 {
		return
	}
	mask := len(m.slots) - 1
	i := m.home(key)
	for m.slots[i].key != key || m.slots[i].val == 0 {
		if m.slots[i].val == 0 {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; m.slots[j].val != 0; j = (j + 1) & mask {
		if h := m.home(m.slots[j].key); (j-h)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = hashSlot{}
	m.size--
}

func (m *hashMap) resize(n int) {
	size := 16
	for size < n {
		size *= 2
	}
	old := m.slots
	m.slots, m.size, m.shift, m.group = make([]hashSlot, size), 0, 64, 0
	for s := size; s > 1; s >>= 1 {
		m.shift--
	}
	if size >= groupFrom {
		m.group = groupMask
	}
	for _, s := range old {
		if s.val != 0 {
			m.put(s.key, s.val-1)
		}
	}
}
