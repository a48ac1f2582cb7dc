package sched

import (
	"fmt"
	"slices"
)

// Update returns a new table for the given engines and weights that moves
// as few slots as possible from t. Slot counts become the largest remainder
// apportionment of the new weights (as Build would give), and exactly
// Σ max(0, old count − new count) slots change owner: engines over their
// new count release their surplus, engines under it take only released
// slots, engines no longer listed release all of theirs, and every other
// slot keeps its engine. That number is the minimum at slot granularity,
// so the share of keys that move equals the total variation distance
// between the old and new slot shares.
//
// Which slots move is chosen to keep runs long (the encoding is
// run-length): an engine releases whole short runs first, then trims a
// run at an end next to an engine that needs slots; an engine that needs
// slots first extends its own runs into neighbouring free slots, then
// fills from the remaining free intervals, best fit first, so few
// intervals are split. All of it is deterministic, so the optimizer and a
// data plane updating the same table with the same weights get
// bit-identical results. The slot count stays that of t.
//
// The work is on runs, not slots: apart from copying the slot array, an
// update costs time in the number of runs and of moved ranges, so a small
// weight change is cheap on a table of any size (README.md).
func (t *Table) Update(engines []string, weights []float64) (*Table, error) {
	u := Updater{once: true}
	return u.Update(t, engines, weights)
}

// Updater holds the working memory of table updates, so that a caller
// updating tables again and again (a data plane swapping in each
// snapshot's table, the backtester's control ticks) reuses it instead of
// allocating it each time: an update then allocates only the new table.
// Its updates are Table.Update's and Rebalance's, bit for bit. The zero
// Updater is ready to use. An Updater is not safe for concurrent use;
// the tables it returns share nothing with it.
type Updater struct {
	u      updater
	sorted []int     // canonical's order
	names  []string  // the engines sorted by name
	ws     []float64 // their weights
	quota  []int
	rem    []float64 // apportion's remainders
	byRem  []int     // apportion's order
	spans  []span    // the new runs before they are copied out
	once   bool      // used for one update only: the table takes the slices, uncopied
}

// Update is t.Update(engines, weights) with u's working memory.
func (u *Updater) Update(t *Table, engines []string, weights []float64) (*Table, error) {
	if t.n == 0 {
		return nil, fmt.Errorf("sched: update: the previous table is empty")
	}
	if err := u.canonical(engines, weights); err != nil {
		return nil, fmt.Errorf("sched: update: %w", err)
	}
	u.apportion(t.n)
	sameNames := slices.Equal(u.names, t.names)
	if sameNames && slices.Equal(u.quota, t.counts) {
		return t, nil // nothing would move: t is immutable, so it is the answer
	}
	names := t.names // immutable, so a table with the same engines shares them
	if !sameNames {
		names = own(u, u.names)
	}
	w := &u.u
	w.reset(t, names, u.quota, sameNames)
	w.release()
	w.findGaps()
	w.grow()
	w.fill()
	next, err := u.table()
	if err != nil {
		return nil, fmt.Errorf("sched: update: %w", err)
	}
	return next, nil
}

// own returns s for a new table to keep: a copy of u's scratch, unless u
// serves one update only (Table.Update), whose scratch nothing reuses.
func own[T any](u *Updater, s []T) []T {
	if u.once {
		return s
	}
	return slices.Clone(s)
}

// Rebalance is Rebalance(prev, engines, weights) with u's working memory.
func (u *Updater) Rebalance(prev *Table, engines []string, weights []float64) (*Table, error) {
	if prev == nil || prev.n == 0 {
		return Build(engines, weights, DefaultSlots)
	}
	return u.Update(prev, engines, weights)
}

// updater is one Update in progress. The old table's runs become
// segments; releasing slots shrinks a segment's owned part [lo, hi) from
// an end (or to nothing), and the free intervals left between owned parts
// are the gaps, which growing engines claim from their ends and filling
// engines from their starts. Claims are recorded as spans, so the new
// table is the old slot array with the claimed ranges rewritten. Its
// slices are reused by the next update of the same Updater.
type updater struct {
	t      *Table
	names  []string
	quota  []int
	idx    []int32 // old engine index -> new, -1 when no longer listed
	same   bool    // the engines are the old ones: indices unchanged
	segs   []segment
	runs   []int32 // segment indices by new engine: runs[runStart[e]:runStart[e+1]]
	runAt  []int32
	need   []int
	gaps   []gap
	claims []span

	// scratch of the steps
	counts []int   // slots each new engine keeps from the old table
	next   []int32 // reset's fill position in runs, by engine
	order  []int32 // release's runs of one engine
	byNeed []int   // fill's engines
	fs     freeSet
}

// segment is one run of the old table: slots [start, end), owned by new
// engine e (-1: no longer listed) over [lo, hi) after releases.
type segment struct {
	start, end, lo, hi, e int32
	gapBefore, gapAfter   int32 // the gap ending at lo / starting at hi, -1 if none
}

// gap is a maximal free interval [a, b) after releases; claims move its
// ends inwards.
type gap struct{ a, b int32 }

// reset starts an update of t to names (same: t's engines) with slot
// counts quota.
func (u *updater) reset(t *Table, names []string, quota []int, same bool) {
	u.t, u.names, u.quota, u.same = t, names, quota, same
	if same {
		u.idx = resize(u.idx, len(names))
		for i := range u.idx {
			u.idx[i] = int32(i)
		}
	} else {
		u.idx = remapIndex(u.idx, t.names, names)
	}
	u.segs = resize(u.segs, len(t.spans))
	u.counts = zeroed(u.counts, len(names))
	u.runAt = zeroed(u.runAt, len(names)+1)
	for i, sp := range t.spans {
		e := u.idx[sp.e]
		end := sp.start + sp.n
		sg := segment{start: sp.start, end: end, lo: sp.start, hi: end, e: e, gapBefore: -1, gapAfter: -1}
		if e < 0 {
			sg.hi = sp.start // released whole
		} else {
			u.counts[e] += int(sp.n)
			u.runAt[e+1]++
		}
		u.segs[i] = sg
	}
	for e := range names {
		u.runAt[e+1] += u.runAt[e]
	}
	u.runs = resize(u.runs, int(u.runAt[len(names)]))
	u.next = append(u.next[:0], u.runAt[:len(names)]...)
	for i, sg := range u.segs {
		if sg.e >= 0 {
			u.runs[u.next[sg.e]] = int32(i)
			u.next[sg.e]++
		}
	}
	u.need = resize(u.need, len(names))
	for e, q := range quota {
		u.need[e] = max(0, q-u.counts[e])
		if u.counts[e] > q {
			u.need[e] = -(u.counts[e] - q) // surplus, negated until release
		}
	}
	u.gaps, u.claims = u.gaps[:0], u.claims[:0]
}

// zeroed returns s with length n and every element zero, reusing its
// array when it is large enough.
func zeroed[T any](s []T, n int) []T {
	s = resize(s, n)
	clear(s)
	return s
}

// remapIndex maps each old engine index to its index in names, or -1,
// in idx's array when it is large enough.
func remapIndex(idx []int32, old, names []string) []int32 {
	idx = resize(idx, len(old))
	j := 0
	for i, n := range old {
		for j < len(names) && names[j] < n {
			j++
		}
		idx[i] = -1
		if j < len(names) && names[j] == n {
			idx[i] = int32(j)
		}
	}
	return idx
}

// engineRuns lists engine e's segments in ascending slot order.
func (u *updater) engineRuns(e int) []int32 { return u.runs[u.runAt[e]:u.runAt[e+1]] }

// release frees every engine's surplus, engines in index order: whole
// runs, shortest first (the later run first on equal length), then the
// tail or head of the next shortest, at an end that borders an engine that
// needs slots if one does (the tail of the shortest otherwise), so that
// engine can grow into them without starting a new run.
func (u *updater) release() {
	order := u.order
	for e := range u.need {
		k := -u.need[e]
		if k <= 0 {
			continue
		}
		u.need[e] = 0
		order = append(order[:0], u.engineRuns(e)...)
		slices.SortFunc(order, func(a, b int32) int {
			sa, sb := &u.segs[a], &u.segs[b]
			if c := (sa.end - sa.start) - (sb.end - sb.start); c != 0 {
				return int(c)
			}
			return int(sb.start - sa.start)
		})
		i := 0
		for ; i < len(order); i++ {
			sg := &u.segs[order[i]]
			if n := int(sg.end - sg.start); n > k {
				break
			} else {
				k -= n
			}
			sg.hi = sg.lo // released whole
		}
		if k > 0 && i < len(order) {
			u.trim(order[i:], int32(k))
		}
	}
	u.order = order
}

// trim frees k slots from one end of one of the segments in rs (each
// longer than k).
func (u *updater) trim(rs []int32, k int32) {
	for _, i := range rs {
		if u.needyAfter(int(i)) {
			u.segs[i].hi -= k
			return
		}
		if u.needyBefore(int(i)) {
			u.segs[i].lo += k
			return
		}
	}
	u.segs[rs[0]].hi -= k
}

// needyAfter reports whether the slot after segment i is owned now by an
// engine that needs slots; needyBefore the same for the slot before it.
func (u *updater) needyAfter(i int) bool {
	if i+1 >= len(u.segs) {
		return false
	}
	n := &u.segs[i+1]
	return n.e >= 0 && n.lo == n.start && n.hi > n.lo && u.need[n.e] > 0
}

func (u *updater) needyBefore(i int) bool {
	if i == 0 {
		return false
	}
	p := &u.segs[i-1]
	return p.e >= 0 && p.hi == p.end && p.hi > p.lo && u.need[p.e] > 0
}

// findGaps lists the maximal free intervals in ascending order and links
// each segment to the gaps bordering its owned part.
func (u *updater) findGaps() {
	open := int32(-1) // start of the free interval being extended
	for i := range u.segs {
		sg := &u.segs[i]
		if sg.hi == sg.lo { // all free
			if open < 0 {
				open = sg.start
			}
			continue
		}
		if sg.lo > sg.start && open < 0 {
			open = sg.start
		}
		if open >= 0 {
			u.gaps = append(u.gaps, gap{open, sg.lo})
			sg.gapBefore = int32(len(u.gaps) - 1)
			open = -1
		}
		if sg.hi < sg.end {
			open = sg.hi
		}
	}
	if open >= 0 {
		u.gaps = append(u.gaps, gap{open, int32(u.t.n)})
	}
	next := 0 // gaps are ascending: the gap starting at a segment's hi is the next one
	for i := range u.segs {
		sg := &u.segs[i]
		if sg.gapBefore >= 0 {
			next = int(sg.gapBefore) + 1
		}
		if sg.hi > sg.lo && next < len(u.gaps) && u.gaps[next].a == sg.hi {
			sg.gapAfter = int32(next)
		}
	}
}

// grow lets every engine that needs slots extend its runs, in ascending
// order, into the free slots right after them, then right before them.
func (u *updater) grow() {
	for e := range u.need {
		for _, i := range u.engineRuns(e) {
			if u.need[e] == 0 {
				break
			}
			sg := &u.segs[i]
			if g := sg.gapAfter; g >= 0 && u.gaps[g].a == sg.end {
				k := min(int32(u.need[e]), u.gaps[g].b-u.gaps[g].a)
				u.claim(u.gaps[g].a, k, e)
				u.gaps[g].a += k
			}
			if g := sg.gapBefore; g >= 0 && u.gaps[g].b == sg.start {
				k := min(int32(u.need[e]), u.gaps[g].b-u.gaps[g].a)
				u.claim(u.gaps[g].b-k, k, e)
				u.gaps[g].b -= k
			}
		}
	}
}

func (u *updater) claim(start, k int32, e int) {
	if k > 0 {
		u.claims = append(u.claims, span{start: start, n: k, e: int32(e)})
		u.need[e] -= int(k)
	}
}

// fill assigns the free intervals to engines that still need slots, the
// largest need first (ties by index), each taking from the start of the
// smallest interval that holds its whole need, or else the largest
// interval whole and then continuing: few intervals get split, so few new
// runs start.
func (u *updater) fill() {
	if cap(u.byNeed) < len(u.need) {
		u.byNeed = make([]int, 0, len(u.need))
	}
	order := u.byNeed[:0]
	for e, k := range u.need {
		if k > 0 {
			order = append(order, e)
		}
	}
	u.byNeed = order
	slices.SortStableFunc(order, func(a, b int) int { return u.need[b] - u.need[a] })
	fs := &u.fs
	fs.reset(u.gaps)
	for _, e := range order {
		for u.need[e] > 0 {
			i := fs.bestFit(int32(u.need[e]))
			if i < 0 {
				return // cannot happen: needs sum to the free slots; table() reports it
			}
			g := &u.gaps[i]
			k := min(int32(u.need[e]), g.b-g.a)
			u.claim(g.a, k, e)
			fs.shrink(i, k)
		}
	}
}

// freeSet holds the non-empty gaps ordered by size, then position, so
// that the best fit is a binary search, not a scan of every gap.
type freeSet struct {
	gaps []gap
	ord  []int32 // indices into gaps, by (size, index) ascending
}

// reset makes fs the set of the non-empty gaps, reusing its order's array.
func (fs *freeSet) reset(gaps []gap) {
	fs.gaps, fs.ord = gaps, fs.ord[:0]
	for i, g := range gaps {
		if g.b > g.a {
			fs.ord = append(fs.ord, int32(i))
		}
	}
	slices.SortFunc(fs.ord, fs.cmp)
}

func (fs *freeSet) size(i int32) int32 { return fs.gaps[i].b - fs.gaps[i].a }

func (fs *freeSet) cmp(i, j int32) int {
	if c := fs.size(i) - fs.size(j); c != 0 {
		return int(c)
	}
	return int(i - j)
}

// firstOfSize is the position in ord of the first gap of at least n slots.
func (fs *freeSet) firstOfSize(n int32) int {
	pos, _ := slices.BinarySearchFunc(fs.ord, n, func(i, n int32) int { return int(fs.size(i) - n) })
	return pos
}

// bestFit returns the smallest gap of at least k slots, or else the
// largest (-1 if none is left); ties go to the lowest slot.
func (fs *freeSet) bestFit(k int32) int {
	if len(fs.ord) == 0 {
		return -1
	}
	if pos := fs.firstOfSize(k); pos < len(fs.ord) {
		return int(fs.ord[pos])
	}
	return int(fs.ord[fs.firstOfSize(fs.size(fs.ord[len(fs.ord)-1]))])
}

// shrink takes k slots from the start of gap i and moves it to its new
// place in the order (out of it when empty).
func (fs *freeSet) shrink(i int, k int32) {
	at, _ := slices.BinarySearchFunc(fs.ord, int32(i), fs.cmp)
	fs.ord = slices.Delete(fs.ord, at, at+1)
	fs.gaps[i].a += k
	if fs.size(int32(i)) > 0 {
		at, _ = slices.BinarySearchFunc(fs.ord, int32(i), fs.cmp)
		fs.ord = slices.Insert(fs.ord, at, int32(i))
	}
}

// table lays out the new table: the old slots with the claimed ranges
// rewritten (every slot rewritten when engine indices changed), its runs
// merged from the kept parts and the claims, counts the quota. Seeds are
// the old table's when the engines are the same (tables are immutable,
// so they can share them).
func (u *Updater) table() (*Table, error) {
	w := &u.u
	for e, k := range w.need {
		if k != 0 {
			return nil, fmt.Errorf("internal error: engine %q ends %d slots short", w.names[e], k)
		}
	}
	slices.SortFunc(w.claims, func(a, b span) int { return int(a.start - b.start) })
	slots := w.slots()
	if n := len(w.segs) + len(w.claims); cap(u.spans) < n {
		u.spans = make([]span, 0, n)
	}
	spans, err := w.mergeSpans(u.spans[:0])
	u.spans = spans
	if err != nil {
		return nil, err
	}
	seeds := w.t.seeds
	if !w.same {
		seeds = make([]uint64, len(w.names))
		for i, j := range w.idx {
			if j >= 0 {
				seeds[j] = w.t.seeds[i]
			}
		}
		for j, n := range w.names {
			if seeds[j] == 0 {
				seeds[j] = HashKey(n)
			}
		}
	}
	return &Table{slots: slots, n: w.t.n, mask: w.t.mask, names: w.names, counts: own(u, w.quota),
		seeds: seeds, spans: own(u, spans)}, nil
}

// slots is the new slot array: the old one with the claimed ranges
// rewritten (every slot rewritten when engine indices changed), or nil
// for a compact table.
func (u *updater) slots() []uint16 {
	if u.t.slots == nil {
		return nil
	}
	slots := make([]uint16, u.t.n)
	if u.same {
		copy(slots, u.t.slots)
	} else {
		for _, sg := range u.segs {
			fillSlots(slots[sg.lo:sg.hi], sg.e)
		}
	}
	for _, c := range u.claims {
		fillSlots(slots[c.start:c.start+c.n], c.e)
	}
	return slots
}

func fillSlots(s []uint16, e int32) {
	for i := range s {
		s[i] = uint16(e)
	}
}

// mergeSpans merges the kept parts of the segments and the claims (both
// ascending) into the new table's maximal runs, appended to out,
// checking that they cover every slot exactly once.
func (u *updater) mergeSpans(out []span) ([]span, error) {
	pos := int32(0)
	add := func(sp span) error {
		if sp.start != pos {
			return fmt.Errorf("internal error: slot %d left unassigned", pos)
		}
		pos += sp.n
		if n := len(out); n > 0 && out[n-1].e == sp.e {
			out[n-1].n += sp.n
		} else {
			out = append(out, sp)
		}
		return nil
	}
	c := 0
	for _, sg := range u.segs {
		if sg.hi == sg.lo {
			continue
		}
		for ; c < len(u.claims) && u.claims[c].start < sg.lo; c++ {
			if err := add(u.claims[c]); err != nil {
				return nil, err
			}
		}
		if err := add(span{start: sg.lo, n: sg.hi - sg.lo, e: sg.e}); err != nil {
			return out, err
		}
	}
	for ; c < len(u.claims); c++ {
		if err := add(u.claims[c]); err != nil {
			return out, err
		}
	}
	if int(pos) != u.t.n {
		return out, fmt.Errorf("internal error: slot %d left unassigned", pos)
	}
	return out, nil
}
