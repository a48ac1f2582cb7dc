package sched

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// movedSlots counts slots whose engine (by name) differs between tables of
// one size.
func movedSlots(a, b *Table) int {
	n := 0
	for s := range a.Slots() {
		if a.names[a.PickHash(uint64(s))] != b.names[b.PickHash(uint64(s))] {
			n++
		}
	}
	return n
}

// minimumMoves is Σ max(0, old count − new count) by name: the fewest slots
// any assignment with the new counts can move.
func minimumMoves(a, b *Table) int {
	n := 0
	for i, c := range a.counts {
		nc := 0
		if j, ok := b.Index(a.names[i]); ok {
			nc = b.counts[j]
		}
		n += max(0, c-nc)
	}
	return n
}

// A weight shift moves exactly the minimum at slot granularity, and the
// share of keys moved is within 1.05x of the total variation distance
// between the old and new weights.
func TestUpdateMovesTheMinimum(t *testing.T) {
	for _, n := range []int{10, 100, 1000} {
		t.Run(fmt.Sprintf("engines=%d", n), func(t *testing.T) {
			r := newRand(uint64(n))
			names := engineNames(n)
			base := randomWeights(r, n)
			w := base
			tab, err := Build(names, w, DefaultSlots)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for step := range 30 {
				frac, sigma := []float64{1, 0.1, 0.02}[step%3], []float64{0.2, 0.5, 1}[step%3]
				next := perturb(r, base, w, frac, sigma)
				upd, err := tab.Update(names, next)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := upd.Counts(), apportion(next, DefaultSlots); !slices.Equal(got, want) {
					t.Fatalf("step %d: counts are not the apportionment of the new weights", step)
				}
				moved, least := movedSlots(tab, upd), minimumMoves(tab, upd)
				if moved != least {
					t.Fatalf("step %d: moved %d slots, minimum %d", step, moved, least)
				}
				share := float64(moved) / DefaultSlots
				if got := MovedShare(tab, upd); got != share {
					t.Fatalf("step %d: MovedShare %v, moved slots say %v", step, got, share)
				}
				tv := TotalVariation(normalised(names, w), normalised(names, next))
				if tv >= 0.01 {
					worst = math.Max(worst, share/tv)
				}
				tab, w = upd, next
			}
			t.Logf("engines=%d: worst moved share / TV(weights) over 30 shifts with TV >= 0.01: %.4f", n, worst)
			if worst > 1.05 {
				t.Errorf("moved up to %.3fx the minimum share, want <= 1.05x", worst)
			}
		})
	}
}

// The same, counted in keys rather than slots, and against the two
// stateless alternatives: rebuilding the table from scratch, and weighted
// rendezvous hashing.
func TestUpdateMovesFewerKeysThanStatelessHashing(t *testing.T) {
	const n, nkeys, shifts = 100, 10_000, 10
	r := newRand(21)
	names := engineNames(n)
	base := randomWeights(r, n)
	w := base
	tab, err := Build(names, w, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]uint64, nkeys)
	for i := range hashes {
		hashes[i] = HashKey(fmt.Sprintf("conv-%06d", i))
	}
	var tvSum, tableMoved, rebuildMoved, rendezvousMoved float64
	for range shifts {
		next := perturb(r, base, w, 0.3, 0.4)
		upd, err := tab.Update(names, next)
		if err != nil {
			t.Fatal(err)
		}
		rebuilt, err := Build(names, next, DefaultSlots)
		if err != nil {
			t.Fatal(err)
		}
		old, _ := Build(names, w, DefaultSlots)
		for _, h := range hashes {
			tableMoved += b2f(tab.PickHash(h) != upd.PickHash(h))
			rebuildMoved += b2f(old.PickHash(h) != rebuilt.PickHash(h))
			rendezvousMoved += b2f(rendezvous(h, tab.seeds, w) != rendezvous(h, tab.seeds, next))
		}
		tvSum += TotalVariation(normalised(names, w), normalised(names, next))
		tab, w = upd, next
	}
	ratio := func(moved float64) float64 { return moved / nkeys / tvSum }
	t.Logf("moved keys / TV over %d shifts at %d engines: table update %.3f, rebuilt table %.3f, weighted rendezvous %.3f",
		shifts, n, ratio(tableMoved), ratio(rebuildMoved), ratio(rendezvousMoved))
	if got := ratio(tableMoved); got > 1.05 {
		t.Errorf("table update moved %.3fx the minimum share of keys, want <= 1.05x", got)
	}
	if ratio(rendezvousMoved) < 1.3*ratio(tableMoved) || ratio(rebuildMoved) < 1.3*ratio(tableMoved) {
		t.Errorf("stateless hashing moved no more keys than the table update")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// rendezvous is weighted rendezvous hashing (highest random weight with
// score -w/ln(u)), the stateless baseline.
func rendezvous(h uint64, seeds []uint64, w []float64) int {
	best, bestScore := -1, math.Inf(-1)
	for e, s := range seeds {
		if w[e] <= 0 {
			continue
		}
		u := (float64(mix64(h^s)>>11) + 0.5) / (1 << 53)
		if score := -w[e] / math.Log(u); score > bestScore {
			best, bestScore = e, score
		}
	}
	return best
}

func TestUpdateSameWeightsMovesNothing(t *testing.T) {
	r := newRand(2)
	names, ws := engineNames(300), randomWeights(r, 300)
	tab, err := Build(names, ws, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ws = perturb(r, ws, ws, 0.5, 0.5)
		if tab, err = tab.Update(names, ws); err != nil {
			t.Fatal(err)
		}
	}
	again, err := tab.Update(names, ws)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Equal(tab) {
		t.Error("Update with unchanged weights changed the table")
	}
}

// Removed engines give up all their slots; added engines get only released
// slots; every slot that changes hands goes from an engine that shrank to
// one that grew.
func TestUpdateAddsAndRemovesEngines(t *testing.T) {
	tab, err := Build([]string{"a", "b", "c", "d"}, []float64{4, 3, 2, 1}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	upd, err := tab.Update([]string{"a", "c", "d", "e", "f"}, []float64{4, 2, 1, 2, 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "c", "d", "e", "f"}; !slices.Equal(upd.Engines(), want) {
		t.Fatalf("engines = %v, want %v", upd.Engines(), want)
	}
	if want := apportion([]float64{4, 2, 1, 2, 0}, 1024); !slices.Equal(upd.Counts(), want) {
		t.Fatalf("counts = %v, want %v", upd.Counts(), want)
	}
	oldCount := map[string]int{"a": tab.counts[0], "b": tab.counts[1], "c": tab.counts[2], "d": tab.counts[3]}
	newCount := map[string]int{}
	for i, c := range upd.counts {
		newCount[upd.names[i]] = c
	}
	for s := range tab.slots {
		from, to := tab.names[tab.slots[s]], upd.names[upd.slots[s]]
		if from == to {
			continue
		}
		if oldCount[from] <= newCount[from] || oldCount[to] >= newCount[to] {
			t.Fatalf("slot %d moved from %s (%d->%d slots) to %s (%d->%d)",
				s, from, oldCount[from], newCount[from], to, oldCount[to], newCount[to])
		}
	}
	if got, want := movedSlots(tab, upd), minimumMoves(tab, upd); got != want || got < tab.counts[1] {
		t.Errorf("moved %d slots, minimum %d (removed engine b alone had %d)", got, want, tab.counts[1])
	}
}

// The optimizer updates its table and ships the encoding; a replica that
// held the previous encoding and gets a table-less snapshot updates its own
// copy. Both must end bit-identical, and agree on every key.
func TestReplicasAgree(t *testing.T) {
	r := newRand(8)
	names := engineNames(200)
	base := randomWeights(r, 200)
	opt, err := Build(names, base, DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := Decode(opt.Encode())
	if err != nil {
		t.Fatal(err)
	}
	w := base
	for step := range 10 {
		w = perturb(r, base, w, 0.3, 0.5)
		if opt, err = opt.Update(names, w); err != nil {
			t.Fatal(err)
		}
		// The replica is given the engines in another order, as from a map.
		rn, rw := slices.Clone(names), slices.Clone(w)
		slices.Reverse(rn)
		slices.Reverse(rw)
		if replica, err = replica.Update(rn, rw); err != nil {
			t.Fatal(err)
		}
		fresh, err := Decode(opt.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if !replica.Equal(opt) || !fresh.Equal(opt) {
			t.Fatalf("step %d: replicas disagree with the optimizer's table", step)
		}
	}
	for _, k := range convKeys(10_000) {
		if opt.Pick(k) != replica.Pick(k) {
			t.Fatalf("key %s: optimizer picks %d, replica %d", k, opt.Pick(k), replica.Pick(k))
		}
	}
}

func TestRebalance(t *testing.T) {
	names, ws := []string{"a", "b"}, []float64{1, 3}
	built, err := Rebalance(nil, names, ws)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Build(names, ws, DefaultSlots); !built.Equal(want) {
		t.Error("Rebalance(nil) differs from Build with DefaultSlots")
	}
	small, _ := Build(names, []float64{1, 1}, 64)
	upd, err := Rebalance(small, names, ws)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := small.Update(names, ws); !upd.Equal(want) {
		t.Error("Rebalance(prev) differs from prev.Update")
	}
	if _, err := Rebalance(small, []string{"a"}, []float64{-1}); err == nil {
		t.Error("Rebalance accepted a negative weight")
	}
}

// Successive updates fragment the runs the encoding stores. After 50
// optimizer-like updates the encoding must stay well under the 2 bytes per
// slot of a flat array; releasing highest slots first and filling in
// ascending order (the naive choice) reaches about 50 KB at 1000 engines.
func TestFragmentationStaysBounded(t *testing.T) {
	for _, n := range []int{10, 100, 1000} {
		for _, frac := range []float64{1, 0.1} {
			r := newRand(7)
			names := engineNames(n)
			base := randomWeights(r, n)
			w := base
			tab, err := Build(names, w, DefaultSlots)
			if err != nil {
				t.Fatal(err)
			}
			for range 50 {
				w = perturb(r, base, w, frac, 0.4)
				if tab, err = tab.Update(names, w); err != nil {
					t.Fatal(err)
				}
			}
			_, _, _, data := tab.Encode()
			t.Logf("engines=%d, share changed per update %.1f: %d runs, %d bytes after 50 updates", n, frac, runs(tab), len(data))
			if limit := 2 * DefaultSlots / 4; len(data) > limit {
				t.Errorf("engines=%d: encoding grew to %d bytes, want <= %d", n, len(data), limit)
			}
		}
	}
}

// The update algorithm is a contract between the optimizer and data planes
// (a replica given a table-less snapshot must compute the optimizer's
// table), so its exact output is pinned. Weights come from integer
// arithmetic only, so the digest is the same on every platform. A change
// here needs a new encoding/algorithm version, not a new digest.
func TestUpdateGolden(t *testing.T) {
	names := engineNames(60)
	weights := func(step uint64) []float64 {
		w := make([]float64, len(names))
		for i := range w {
			x := mix64(step<<32 | uint64(i))
			w[i] = float64(x>>44) + 1 // 1 .. 2^20
			if x%7 == 0 {
				w[i] = 0
			}
		}
		return w
	}
	tab, err := Build(names[:40], weights(0)[:40], 4096)
	if err != nil {
		t.Fatal(err)
	}
	digest := uint64(0)
	for step := uint64(1); step <= 25; step++ {
		lo, hi := int(step%10), 40+int(step%20) // engines come and go
		if tab, err = tab.Update(names[lo:hi], weights(step)[lo:hi]); err != nil {
			t.Fatal(err)
		}
		_, _, _, data := tab.Encode()
		digest = wyhashSeed(string(data), digest)
	}
	const want = uint64(0xbcd57cbaf23abc6d)
	if digest != want {
		t.Errorf("digest of 25 updates = %#x, want %#x", digest, want)
	}
}
