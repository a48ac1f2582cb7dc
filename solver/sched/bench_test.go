package sched

import (
	"fmt"
	"slices"
	"testing"
)

var engineCounts = []int{10, 100, 1000}

// BenchmarkPick measures the request path: hashing a conversation id and
// reading its slot.
func BenchmarkPick(b *testing.B) {
	for _, n := range engineCounts {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			tab := benchTable(b, n, 0)
			keys := convKeys(1 << 16)
			b.ReportAllocs()
			sum := 0
			for i := 0; b.Loop(); i++ {
				sum += tab.Pick(keys[i&(len(keys)-1)])
			}
			if sum < 0 {
				b.Fatal("impossible")
			}
		})
	}
}

// BenchmarkPickCompact is BenchmarkPick on a compact table (a binary
// search over the runs of a table that has been through 50 updates).
func BenchmarkPickCompact(b *testing.B) {
	for _, n := range engineCounts {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			tab := benchTable(b, n, 50).Compact()
			keys := convKeys(1 << 16)
			b.ReportAllocs()
			sum := 0
			for i := 0; b.Loop(); i++ {
				sum += tab.Pick(keys[i&(len(keys)-1)])
			}
			if sum < 0 {
				b.Fatal("impossible")
			}
			b.ReportMetric(float64(len(tab.spans)), "runs")
		})
	}
}

// BenchmarkPickSkip is the guarded path with a tenth of the engines down:
// most keys resolve at their own slot, displaced ones after a few probes.
func BenchmarkPickSkip(b *testing.B) {
	for _, n := range engineCounts {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			tab := benchTable(b, n, 0)
			keys := convKeys(1 << 16)
			down := make([]bool, n)
			for i := 0; i < n; i += 10 {
				down[i] = true
			}
			b.ReportAllocs()
			sum := 0
			for i := 0; b.Loop(); i++ {
				e, _ := tab.PickSkip(HashKey(keys[i&(len(keys)-1)]), func(e int) bool { return down[e] })
				sum += e
			}
			if sum < 0 {
				b.Fatal("impossible")
			}
		})
	}
}

func BenchmarkHashKey(b *testing.B) {
	keys := convKeys(1024)
	b.ReportAllocs()
	var x uint64
	for i := 0; b.Loop(); i++ {
		x ^= HashKey(keys[i&1023])
	}
	if x == 1 {
		b.Log(x)
	}
}

func BenchmarkBuild(b *testing.B) {
	names, ws := engineNames(1000), randomWeights(newRand(1), 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(names, ws, DefaultSlots); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate updates a 1000-engine table that has been through 50
// updates (so it is fragmented as in service) to new weights: every
// engine's weight redrawn (all), 30% of them (optimizer-like), or one
// pair of engines trading 1, 64 or 1024 slots (a small correction). It
// reports the slots moved and the time per moved slot, for Update and
// for the slot-by-slot reference it replaced (ref), which costs the same
// whatever moves, for a compact table (runs only, no slot array), and for
// both with an Updater reused across updates (reuse, compact-reuse: the
// data plane's and the backtester's way).
func BenchmarkUpdate(b *testing.B) {
	r := newRand(1)
	names := engineNames(1000)
	base := randomWeights(r, 1000)
	tab := benchTable(b, 1000, 50)
	ctab := tab.Compact()
	cur := weightsOf(tab)
	cases := []struct {
		name string
		next []float64
	}{
		{"all", perturb(r, base, base, 1, 0.4)},
		{"30pct", perturb(r, base, cur, 0.3, 0.4)},
	}
	donor := 0 // the engine with the most slots gives them to engine 10
	for i, c := range tab.counts {
		if c > tab.counts[donor] {
			donor = i
		}
	}
	for _, k := range []int{1, 64, 1024} {
		next := slices.Clone(cur)
		next[10] += float64(k)
		next[donor] -= float64(k)
		cases = append(cases, struct {
			name string
			next []float64
		}{fmt.Sprintf("pair-%d", k), next})
	}
	var up Updater
	for _, tc := range cases {
		for _, impl := range []struct {
			name   string
			update func() (*Table, error)
		}{
			{"run", func() (*Table, error) { return tab.Update(names, tc.next) }},
			{"compact", func() (*Table, error) { return ctab.Update(names, tc.next) }},
			{"reuse", func() (*Table, error) { return up.Update(tab, names, tc.next) }},
			{"compact-reuse", func() (*Table, error) { return up.Update(ctab, names, tc.next) }},
			{"ref", func() (*Table, error) { return refUpdate(tab, names, tc.next) }},
		} {
			b.Run(tc.name+"/"+impl.name, func(b *testing.B) {
				upd, err := impl.update()
				if err != nil {
					b.Fatal(err)
				}
				moved := movedSlots(tab, upd)
				b.ReportAllocs()
				clock := startCPU(b)
				for b.Loop() {
					if _, err := impl.update(); err != nil {
						b.Fatal(err)
					}
				}
				cpu := clock.stop(b)
				b.ReportMetric(float64(moved), "moved-slots")
				b.ReportMetric(cpu/float64(max(moved, 1)), "cpu-ns/moved-slot")
				b.ReportMetric(float64(len(tab.spans)), "runs")
			})
		}
	}
}

// weightsOf returns a table's slot counts as weights, whose
// apportionment is exactly those counts.
func weightsOf(t *Table) []float64 {
	w := make([]float64, t.Len())
	for i, c := range t.counts {
		w[i] = float64(c)
	}
	return w
}

// BenchmarkEncode and BenchmarkDecode report the encoded size of a table
// after 50 optimizer-like updates (bytes/table).
func BenchmarkEncode(b *testing.B) {
	for _, n := range engineCounts {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			tab := benchTable(b, n, 50)
			b.ReportAllocs()
			var data []byte
			for b.Loop() {
				_, _, _, data = tab.Encode()
			}
			b.ReportMetric(float64(len(data)), "bytes/table")
			b.ReportMetric(float64(runs(tab)), "runs/table")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range engineCounts {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			slots, engines, enc, data := benchTable(b, n, 50).Encode()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(slots, engines, enc, data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/table")
		})
	}
}

// BenchmarkChurn is a measurement more than a timing: over 10 weight
// shifts it reports keys moved per unit of total variation distance
// between old and new weights (1 is the minimum) for the table update,
// for rebuilding the table from scratch, and for weighted rendezvous
// hashing (over 10,000 keys, 2,000 at 1000 engines, where each key costs
// 1000 rendezvous scores). Run with -benchtime=1x.
func BenchmarkChurn(b *testing.B) {
	for _, n := range engineCounts {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			var update, rebuild, rdv float64
			for b.Loop() {
				update, rebuild, rdv = churnRatios(b, n, 10, min(10_000, 2_000_000/n))
			}
			b.ReportMetric(update, "moved/tv-update")
			b.ReportMetric(rebuild, "moved/tv-rebuild")
			b.ReportMetric(rdv, "moved/tv-rendezvous")
		})
	}
}

func churnRatios(b *testing.B, n, shifts, nkeys int) (update, rebuild, rdv float64) {
	r := newRand(uint64(n) + 100)
	names := engineNames(n)
	base := randomWeights(r, n)
	w := base
	tab, err := Build(names, w, DefaultSlots)
	if err != nil {
		b.Fatal(err)
	}
	hashes := make([]uint64, nkeys)
	for i := range hashes {
		hashes[i] = HashKey(fmt.Sprintf("conv-%06d", i))
	}
	tv := 0.0
	for range shifts {
		next := perturb(r, base, w, 0.3, 0.4)
		upd, _ := tab.Update(names, next)
		old, _ := Build(names, w, DefaultSlots)
		fresh, _ := Build(names, next, DefaultSlots)
		update += MovedShare(tab, upd)
		rebuild += MovedShare(old, fresh)
		moved := 0
		for _, h := range hashes {
			if rendezvous(h, tab.seeds, w) != rendezvous(h, tab.seeds, next) {
				moved++
			}
		}
		rdv += float64(moved) / float64(nkeys)
		tv += TotalVariation(normalised(names, w), normalised(names, next))
		tab, w = upd, next
	}
	return update / tv, rebuild / tv, rdv / tv
}

// benchTable builds a table of n engines and applies updates stationary
// weight updates to it.
func benchTable(b *testing.B, n, updates int) *Table {
	r := newRand(uint64(n))
	names := engineNames(n)
	base := randomWeights(r, n)
	tab, err := Build(names, base, DefaultSlots)
	if err != nil {
		b.Fatal(err)
	}
	w := base
	for range updates {
		w = perturb(r, base, w, 0.1, 0.4)
		if tab, err = tab.Update(names, w); err != nil {
			b.Fatal(err)
		}
	}
	return tab
}
