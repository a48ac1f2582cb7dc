package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
)

// The slot-by-slot update as it was before updates worked on runs: the
// reference the run-based Update must match bit for bit
// (TestUpdateMatchesReference).

// refUpdate is Table.Update computed over every slot.
func refUpdate(t *Table, engines []string, weights []float64) (*Table, error) {
	names, ws, err := canonical(engines, weights)
	if err != nil {
		return nil, err
	}
	quota := apportion(ws, len(t.slots))
	owner := refRemap(t, names)
	refReassign(owner, quota)
	slots, err := refFinish(owner)
	if err != nil {
		return nil, err
	}
	return newTable(names, slots), nil
}

// reassign frees and hands out slots so every engine ends with its quota,
// moving only surplus slots (and those of engines no longer listed).
func refReassign(owner []int32, quota []int) {
	counts := make([]int, len(quota))
	for _, o := range owner {
		if o >= 0 {
			counts[o]++
		}
	}
	runs := refRunsByEngine(owner, len(quota))
	need := make([]int, len(quota))
	for e := range quota {
		need[e] = max(0, quota[e]-counts[e])
	}
	for e := range quota {
		if surplus := counts[e] - quota[e]; surplus > 0 {
			refRelease(owner, runs[e], surplus, need)
		}
	}
	refTake(owner, runs, need)
}

// refRun is a maximal range of consecutive slots with one owner.
type refRun struct{ start, n int }

// remap translates t's slot owners to indices into names; slots of engines
// not in names come out free (-1).
func refRemap(t *Table, names []string) []int32 {
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
func refRunsByEngine(owner []int32, engines int) [][]refRun {
	runs := make([][]refRun, engines)
	for s := 0; s < len(owner); {
		e, start := owner[s], s
		for s < len(owner) && owner[s] == e {
			s++
		}
		if e >= 0 {
			runs[e] = append(runs[e], refRun{start, s - start})
		}
	}
	return runs
}

// release frees k slots of one engine, given its runs: whole runs, shortest
// first (so fragments disappear), then the tail or head of a longer refRun,
// preferring an end that borders an engine that needs slots, so that
// engine can extend into them without starting a new refRun.
func refRelease(owner []int32, rs []refRun, k int, need []int) {
	order := slices.Clone(rs)
	slices.SortFunc(order, func(a, b refRun) int {
		if c := cmp.Compare(a.n, b.n); c != 0 {
			return c
		}
		return cmp.Compare(b.start, a.start)
	})
	i := 0
	for ; i < len(order) && order[i].n <= k; i++ {
		refFree(owner, order[i].start, order[i].n)
		k -= order[i].n
	}
	if k > 0 && i < len(order) {
		refTrim(owner, order[i:], k, need)
	}
}

// trim frees k slots from one end of one of the runs, each longer than k:
// the first refRun (shortest) bordering an engine that needs slots, at that
// end, else the tail of the first refRun.
func refTrim(owner []int32, rs []refRun, k int, need []int) {
	for _, r := range rs {
		if refNeedy(owner, r.start+r.n, need) {
			refFree(owner, r.start+r.n-k, k)
			return
		}
		if refNeedy(owner, r.start-1, need) {
			refFree(owner, r.start, k)
			return
		}
	}
	refFree(owner, rs[0].start+rs[0].n-k, k)
}

// needy reports whether slot s exists and belongs to an engine that needs
// more slots.
func refNeedy(owner []int32, s int, need []int) bool {
	return s >= 0 && s < len(owner) && owner[s] >= 0 && need[owner[s]] > 0
}

func refFree(owner []int32, start, n int) {
	for s := start; s < start+n; s++ {
		owner[s] = -1
	}
}

// take gives every engine its needed slots from the free ones: first by
// growing its existing runs into free neighbours, then from the free
// intervals that remain (see fill).
func refTake(owner []int32, runs [][]refRun, need []int) {
	for e := range need {
		for _, r := range runs[e] {
			if need[e] == 0 {
				break
			}
			need[e] -= refGrow(owner, int32(e), r.start+r.n, 1, need[e])
			need[e] -= refGrow(owner, int32(e), r.start-1, -1, need[e])
		}
	}
	refFill(owner, need)
}

// fill assigns the free intervals to engines that still need slots, the
// largest need first (ties by index), each taking from the start of the
// smallest interval that holds its whole need, or else the largest
// interval whole and then continuing: few intervals get split, so few new
// runs start.
func refFill(owner []int32, need []int) {
	gaps := refFreeRuns(owner)
	order := make([]int, 0, len(need))
	for e, k := range need {
		if k > 0 {
			order = append(order, e)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(need[b], need[a]) })
	for _, e := range order {
		for need[e] > 0 {
			i := refBestFit(gaps, need[e])
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
func refFreeRuns(owner []int32) []refRun {
	var free []refRun
	for s := 0; s < len(owner); s++ {
		if owner[s] >= 0 {
			continue
		}
		start := s
		for s < len(owner) && owner[s] < 0 {
			s++
		}
		free = append(free, refRun{start, s - start})
	}
	return free
}

// bestFit returns the smallest free refRun of at least k slots, or else the
// largest non-empty one (-1 if none); ties go to the lowest slot.
func refBestFit(free []refRun, k int) int {
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
func refGrow(owner []int32, e int32, s, step, k int) int {
	got := 0
	for ; got < k && s >= 0 && s < len(owner) && owner[s] < 0; s += step {
		owner[s] = e
		got++
	}
	return got
}

// finish converts a complete assignment to slots; a free slot left over
// would be a bug, reported rather than served.
func refFinish(owner []int32) ([]uint16, error) {
	slots := make([]uint16, len(owner))
	for s, o := range owner {
		if o < 0 {
			return nil, fmt.Errorf("internal error: slot %d left unassigned", s)
		}
		slots[s] = uint16(o)
	}
	return slots, nil
}

// TestUpdateMatchesReference runs random update sequences (engines added
// and removed, weights zeroed, small and large shifts, tables from 1 to
// 2^16 slots) through Update and the slot-by-slot reference, and requires
// bit-identical tables, whose runs are those of their slots.
func TestUpdateMatchesReference(t *testing.T) {
	for seed := range uint64(40) {
		r := newRand(seed + 1000)
		slots := 1 << (r.IntN(17))
		all := engineNames(3 + r.IntN(300))
		base := randomWeights(r, len(all))
		pick := func() ([]string, []float64) {
			var names []string
			var ws []float64
			for i, n := range all {
				if r.Float64() < 0.9 {
					w := base[i] * math.Exp(0.5*r.NormFloat64())
					if r.Float64() < 0.05 {
						w = 0
					}
					names, ws = append(names, n), append(ws, w)
				}
			}
			if len(names) == 0 {
				names, ws = all[:1], []float64{1}
			}
			ws[r.IntN(len(ws))] += 1 // at least one positive
			return names, ws
		}
		names, ws := pick()
		tab, err := Build(names, ws, slots)
		if err != nil {
			t.Fatal(err)
		}
		for step := range 30 {
			if step%5 != 0 { // mostly the same engines, a few weights moved
				for i := range ws {
					if r.Float64() < 0.2 {
						ws[i] *= math.Exp(0.3 * r.NormFloat64())
					}
				}
			} else {
				names, ws = pick()
			}
			got, err := tab.Update(names, ws)
			if err != nil {
				t.Fatal(err)
			}
			want, err := refUpdate(tab, names, ws)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(want) || !slices.Equal(got.counts, want.counts) || !slices.Equal(got.seeds, want.seeds) {
				t.Fatalf("seed %d step %d: Update differs from the reference", seed, step)
			}
			if !slices.Equal(got.spans, want.spans) {
				t.Fatalf("seed %d step %d: runs %v are not those of the slots %v", seed, step, got.spans, want.spans)
			}
			tab = got
		}
	}
}
