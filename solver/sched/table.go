package sched

import (
	"fmt"
	"slices"
)

// DefaultSlots is the table size used when none is given: 65,536 slots, so
// a weight is honoured to 1/65536 (0.0015%) and the table is 128 KiB.
const DefaultSlots = 1 << 16

// MaxSlots bounds the table size (2 MiB of slots), so a decoded table
// cannot make a data plane allocate without limit.
const MaxSlots = 1 << 20

// MaxEngines is the most engines a table can name: slots hold uint16
// engine indices.
const MaxEngines = 1 << 16

// Table maps every key hash to an engine through a fixed array of slots,
// each owned by one engine; an engine's share of the slots is its weight.
// A Table is immutable once built and safe for concurrent use. The zero
// Table picks nothing (Pick returns -1).
type Table struct {
	slots  []uint16 // slot -> engine index; nil in a compact table (Compact)
	n      int      // slot count, a power of two (0: the zero Table)
	mask   uint64   // n - 1
	names  []string // engine names, strictly ascending
	counts []int    // slots owned by each engine
	seeds  []uint64 // HashKey of each name, for the fallback ranking
	spans  []span   // the slots as maximal runs, ascending: what Update and Encode work on
}

// span is a maximal run of slots with one owner: slots start..start+n−1
// belong to engine e.
type span struct{ start, n, e int32 }

// Build returns the table for the given engines and weights, laid out from
// scratch: engines are sorted by name, slot counts are the largest
// remainder apportionment of the weights, and each engine owns one
// contiguous run of slots in name order. The result depends only on the set
// of (name, weight) pairs and slots, never on the order given, so every
// replica builds the same table. Names must be unique and non-empty,
// weights finite and >= 0 with at least one positive, and slots a power of
// two up to MaxSlots. Weights need not sum to 1.
func Build(engines []string, weights []float64, slots int) (*Table, error) {
	if err := checkSlots(slots); err != nil {
		return nil, fmt.Errorf("sched: build: %w", err)
	}
	names, ws, err := canonical(engines, weights)
	if err != nil {
		return nil, fmt.Errorf("sched: build: %w", err)
	}
	return layOut(names, apportion(ws, slots), slots), nil
}

// layOut is the table in which each engine with slots owns one run, in
// name order, of counts[i] slots (counts summing to slots): its runs
// written directly rather than read back from the slot array.
func layOut(names []string, counts []int, slots int) *Table {
	runs := 0
	for _, c := range counts {
		if c > 0 {
			runs++
		}
	}
	t := &Table{slots: make([]uint16, slots), n: slots, mask: uint64(slots - 1), names: names, counts: counts,
		seeds: make([]uint64, len(names)), spans: make([]span, 0, runs)}
	start := int32(0)
	for i, c := range counts {
		if c > 0 {
			t.spans = append(t.spans, span{start: start, n: int32(c), e: int32(i)})
			fillSlots(t.slots[start:start+int32(c)], int32(i))
			start += int32(c)
		}
		t.seeds[i] = HashKey(names[i])
	}
	return t
}

// Rebalance returns prev.Update(engines, weights), or a table built with
// DefaultSlots when there is no previous table: what a data plane does with
// a snapshot that carries weights but no table.
func Rebalance(prev *Table, engines []string, weights []float64) (*Table, error) {
	u := Updater{once: true}
	return u.Rebalance(prev, engines, weights)
}

func checkSlots(slots int) error {
	if slots < 1 || slots > MaxSlots || slots&(slots-1) != 0 {
		return fmt.Errorf("slots %d, want a power of two from 1 to %d", slots, MaxSlots)
	}
	return nil
}

// newTable wraps a complete slot array; names must be valid and every
// owner a valid index.
func newTable(names []string, owner []uint16) *Table {
	t := &Table{
		slots:  owner,
		n:      len(owner),
		mask:   uint64(len(owner) - 1),
		names:  names,
		counts: make([]int, len(names)),
		seeds:  make([]uint64, len(names)),
	}
	for s := 0; s < len(owner); {
		e, start := owner[s], s
		for s < len(owner) && owner[s] == e {
			s++
		}
		t.counts[e] += s - start
		t.spans = append(t.spans, span{start: int32(start), n: int32(s - start), e: int32(e)})
	}
	for i, n := range names {
		t.seeds[i] = HashKey(n)
	}
	return t
}

// Pick returns the index of the engine that serves key: one hash and one
// array read. It is -1 only for the zero Table.
func (t *Table) Pick(key string) int {
	return t.PickHash(HashKey(key))
}

// PickHash is Pick for a key already hashed with HashKey, for callers that
// also need the hash for ShedKey or PickSkip.
func (t *Table) PickHash(h uint64) int {
	i := h & t.mask
	if i < uint64(len(t.slots)) {
		return int(t.slots[i])
	}
	if t.n == 0 {
		return -1
	}
	return t.ownerAt(int32(i)) // compact
}

// ownerAt is the engine of slot i, found among the runs: a compact
// table's pick, a binary search over its runs.
func (t *Table) ownerAt(i int32) int {
	lo, hi := 0, len(t.spans)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if t.spans[mid].start <= i {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int(t.spans[lo].e)
}

// Compact returns the table without its slot array: the same runs and
// picks, each pick a binary search over the runs instead of one array
// read, and updates (Update, Rebalance) that cost time in the number of
// runs only, with no 2-byte-per-slot copy. It suits a backtester that
// updates tables every control tick and picks a few thousand times in
// between; a data plane keeps the full table. Updates of a compact table
// are compact, and give the same tables (Equal) as the full ones. A
// table that is compact already is returned as it is.
func (t *Table) Compact() *Table {
	if t.slots == nil {
		return t
	}
	c := *t
	c.slots = nil
	return &c
}

// Len returns the number of engines the table names, including engines
// that own no slot (weight 0).
func (t *Table) Len() int { return len(t.names) }

// Slots returns the number of slots.
func (t *Table) Slots() int { return t.n }

// Engine returns the name of engine i, or "" when i is out of range.
func (t *Table) Engine(i int) string {
	if i < 0 || i >= len(t.names) {
		return ""
	}
	return t.names[i]
}

// Index returns the index of the named engine.
func (t *Table) Index(name string) (int, bool) {
	return slices.BinarySearch(t.names, name)
}

// Engines returns the engine names in index order (ascending).
func (t *Table) Engines() []string { return slices.Clone(t.names) }

// Counts returns the number of slots each engine owns, by index.
func (t *Table) Counts() []int { return slices.Clone(t.counts) }

// Weights returns each engine's share of the slots, by index: the
// fraction of keys it serves. They sum to 1.
func (t *Table) Weights() []float64 {
	w := make([]float64, len(t.counts))
	for i, c := range t.counts {
		w[i] = float64(c) / float64(t.n)
	}
	return w
}

// Equal reports whether two tables name the same engines and assign every
// slot alike (a compact table and a full one included).
func (t *Table) Equal(u *Table) bool {
	return t.n == u.n && slices.Equal(t.names, u.names) && slices.Equal(t.spans, u.spans)
}
