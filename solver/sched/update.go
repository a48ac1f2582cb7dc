package sched

import (
	"cmp"
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
// intervals are split. All of it is deterministic,
// so the optimizer and a data plane updating the same table with the same
// weights get bit-identical results. The slot count stays that of t.
func (t *Table) Update(engines []string, weights []float64) (*Table, error) {
	if len(t.slots) == 0 {
		return nil, fmt.Errorf("sched: update: the previous table is empty")
	}
	names, ws, err := canonical(engines, weights)
	if err != nil {
		return nil, fmt.Errorf("sched: update: %w", err)
	}
	quota := apportion(ws, len(t.slots))
	if slices.Equal(names, t.names) && slices.Equal(quota, t.counts) {
		return t, nil // nothing would move: t is immutable, so it is the answer
	}
	owner := t.remap(names)
	reassign(owner, quota)
	slots, err := finish(owner)
	if err != nil {
		return nil, fmt.Errorf("sched: update: %w", err)
	}
	return newTable(names, slots), nil
}

// reassign frees and hands out slots so every engine ends with its quota,
// moving only surplus slots (and those of engines no longer listed).
func reassign(owner []int32, quota []int) {
	counts := make([]int, len(quota))
	for _, o := range owner {
		if o >= 0 {
			counts[o]++
		}
	}
	runs := runsByEngine(owner, len(quota))
	need := make([]int, len(quota))
	for e := range quota {
		need[e] = max(0, quota[e]-counts[e])
	}
	for e := range quota {
		if surplus := counts[e] - quota[e]; surplus > 0 {
			release(owner, runs[e], surplus, need)
		}
	}
	take(owner, runs, need)
}

// run is a maximal range of consecutive slots with one owner.
type run struct{ start, n int }

// remap translates t's slot owners to indices into names; slots of engines
// not in names come out free (-1).
func (t *Table) remap(names []string) []int32 {
	idx := make([]int32, len(t.names))
	j := 0
	for i, n := range t.names {
		for j < len(names) && names[j] < n {
			j++
		}
		idx[i] = -1
		if j < len(names) && names[j] == n {
			idx[i] = int32(j)
		}
	}
	owner := make([]int32, len(t.slots))
	for s, e := range t.slots {
		owner[s] = idx[e]
	}
	return owner
}

// runsByEngine lists each engine's runs in ascending slot order.
func runsByEngine(owner []int32, engines int) [][]run {
	runs := make([][]run, engines)
	for s := 0; s < len(owner); {
		e, start := owner[s], s
		for s < len(owner) && owner[s] == e {
			s++
		}
		if e >= 0 {
			runs[e] = append(runs[e], run{start, s - start})
		}
	}
	return runs
}

// release frees k slots of one engine, given its runs: whole runs, shortest
// first (so fragments disappear), then the tail or head of a longer run,
// preferring an end that borders an engine that needs slots, so that
// engine can extend into them without starting a new run.
func release(owner []int32, rs []run, k int, need []int) {
	order := slices.Clone(rs)
	slices.SortFunc(order, func(a, b run) int {
		if c := cmp.Compare(a.n, b.n); c != 0 {
			return c
		}
		return cmp.Compare(b.start, a.start)
	})
	i := 0
	for ; i < len(order) && order[i].n <= k; i++ {
		free(owner, order[i].start, order[i].n)
		k -= order[i].n
	}
	if k > 0 && i < len(order) {
		trim(owner, order[i:], k, need)
	}
}

// trim frees k slots from one end of one of the runs, each longer than k:
// the first run (shortest) bordering an engine that needs slots, at that
// end, else the tail of the first run.
func trim(owner []int32, rs []run, k int, need []int) {
	for _, r := range rs {
		if needy(owner, r.start+r.n, need) {
			free(owner, r.start+r.n-k, k)
			return
		}
		if needy(owner, r.start-1, need) {
			free(owner, r.start, k)
			return
		}
	}
	free(owner, rs[0].start+rs[0].n-k, k)
}

// needy reports whether slot s exists and belongs to an engine that needs
// more slots.
func needy(owner []int32, s int, need []int) bool {
	return s >= 0 && s < len(owner) && owner[s] >= 0 && need[owner[s]] > 0
}

func free(owner []int32, start, n int) {
	for s := start; s < start+n; s++ {
		owner[s] = -1
	}
}

// take gives every engine its needed slots from the free ones: first by
// growing its existing runs into free neighbours, then from the free
// intervals that remain (see fill).
func take(owner []int32, runs [][]run, need []int) {
	for e := range need {
		for _, r := range runs[e] {
			if need[e] == 0 {
				break
			}
			need[e] -= grow(owner, int32(e), r.start+r.n, 1, need[e])
			need[e] -= grow(owner, int32(e), r.start-1, -1, need[e])
		}
	}
	fill(owner, need)
}

// fill assigns the free intervals to engines that still need slots, the
// largest need first (ties by index), each taking from the start of the
// smallest interval that holds its whole need, or else the largest
// interval whole and then continuing: few intervals get split, so few new
// runs start.
func fill(owner []int32, need []int) {
	gaps := freeRuns(owner)
	order := make([]int, 0, len(need))
	for e, k := range need {
		if k > 0 {
			order = append(order, e)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(need[b], need[a]) })
	for _, e := range order {
		for need[e] > 0 {
			i := bestFit(gaps, need[e])
			if i < 0 {
				return // cannot happen: needs sum to the free slots
			}
			k := min(need[e], gaps[i].n)
			for s := gaps[i].start; s < gaps[i].start+k; s++ {
				owner[s] = int32(e)
			}
			gaps[i].start += k
			gaps[i].n -= k
			need[e] -= k
		}
	}
}

// freeRuns lists the maximal runs of free slots in ascending order.
func freeRuns(owner []int32) []run {
	var free []run
	for s := 0; s < len(owner); s++ {
		if owner[s] >= 0 {
			continue
		}
		start := s
		for s < len(owner) && owner[s] < 0 {
			s++
		}
		free = append(free, run{start, s - start})
	}
	return free
}

// bestFit returns the smallest free run of at least k slots, or else the
// largest non-empty one (-1 if none); ties go to the lowest slot.
func bestFit(free []run, k int) int {
	fit, big := -1, -1
	for i, r := range free {
		if r.n >= k && (fit < 0 || r.n < free[fit].n) {
			fit = i
		}
		if r.n > 0 && (big < 0 || r.n > free[big].n) {
			big = i
		}
	}
	if fit >= 0 {
		return fit
	}
	return big
}

// grow claims up to k free slots for e walking from s in direction step,
// stopping at the first owned slot; it returns how many it claimed.
func grow(owner []int32, e int32, s, step, k int) int {
	got := 0
	for ; got < k && s >= 0 && s < len(owner) && owner[s] < 0; s += step {
		owner[s] = e
		got++
	}
	return got
}

// finish converts a complete assignment to slots; a free slot left over
// would be a bug, reported rather than served.
func finish(owner []int32) ([]uint16, error) {
	slots := make([]uint16, len(owner))
	for s, o := range owner {
		if o < 0 {
			return nil, fmt.Errorf("internal error: slot %d left unassigned", s)
		}
		slots[s] = uint16(o)
	}
	return slots, nil
}
