package sched

import (
	"math"
	"slices"
	"testing"
)

// TestUpdaterReuse runs one Updater through table sequences of different
// sizes, engine sets, full and compact, with a failing update between
// them, and checks every update against Table.Update (fresh working
// memory each time), then that no table it returned changed afterwards:
// the reused scratch must never leak into a table.
func TestUpdaterReuse(t *testing.T) {
	var u Updater
	type kept struct {
		tab          *Table
		slots        []uint16
		spans        []span
		counts       []int
		seeds        []uint64
		names        []string
		n            int
		compact      bool
		seed, stepNo int
	}
	var all []kept
	for seed := range uint64(24) {
		r := newRand(seed + 77)
		slots := 1 << (4 + r.IntN(13))
		pool := engineNames(2 + r.IntN(200))
		pick := func() ([]string, []float64) {
			var names []string
			var ws []float64
			for _, n := range pool {
				if r.Float64() < 0.85 {
					names, ws = append(names, n), append(ws, math.Exp(r.NormFloat64()))
				}
			}
			if len(names) == 0 {
				names, ws = pool[:1], []float64{1}
			}
			return names, ws
		}
		names, ws := pick()
		tab, err := Build(names, ws, slots)
		if err != nil {
			t.Fatal(err)
		}
		if seed%2 == 1 {
			tab = tab.Compact()
		}
		for step := range 20 {
			if step%4 == 3 {
				names, ws = pick()
			} else {
				for i := range ws {
					if r.Float64() < 0.3 {
						ws[i] *= math.Exp(0.4 * r.NormFloat64())
					}
				}
			}
			if _, err := u.Update(tab, []string{"a", "a"}, []float64{1, 1}); err == nil {
				t.Fatal("duplicate engines accepted")
			}
			got, err := u.Update(tab, names, ws)
			if err != nil {
				t.Fatal(err)
			}
			want, err := tab.Update(names, ws)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(want) || !slices.Equal(got.counts, want.counts) || !slices.Equal(got.seeds, want.seeds) ||
				!slices.Equal(got.slots, want.slots) || (got.slots == nil) != (want.slots == nil) {
				t.Fatalf("seed %d step %d: the reused Updater differs from Table.Update", seed, step)
			}
			all = append(all, kept{got, slices.Clone(got.slots), slices.Clone(got.spans), slices.Clone(got.counts),
				slices.Clone(got.seeds), slices.Clone(got.names), got.n, got.slots == nil, int(seed), step})
			tab = got
		}
	}
	for _, k := range all {
		g := k.tab
		if !slices.Equal(g.slots, k.slots) || !slices.Equal(g.spans, k.spans) || !slices.Equal(g.counts, k.counts) ||
			!slices.Equal(g.seeds, k.seeds) || !slices.Equal(g.names, k.names) || g.n != k.n || (g.slots == nil) != k.compact {
			t.Fatalf("seed %d step %d: a table changed after later updates", k.seed, k.stepNo)
		}
	}
}

// TestUpdaterRebalance checks that Updater.Rebalance builds without a
// previous table, and returns the previous table itself when nothing
// moves, as Rebalance does.
func TestUpdaterRebalance(t *testing.T) {
	var u Updater
	names, ws := []string{"b", "a", "c"}, []float64{1, 2, 3}
	got, err := u.Rebalance(nil, names, ws)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Build(names, ws, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) {
		t.Fatal("Rebalance(nil) is not Build")
	}
	if again, err := u.Rebalance(got, names, ws); err != nil || again != got {
		t.Fatalf("unchanged weights: got a new table (err %v)", err)
	}
}
