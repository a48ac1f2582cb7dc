package sched

import (
	"math"
	"testing"
)

// A compact table (runs only) picks exactly as the full one, with and
// without skipping, reports the same slots, counts and encoding, and
// updates to the same tables, through a sequence of updates with engines
// coming and going.
func TestCompactTablesPickAlike(t *testing.T) {
	r := newRand(31)
	all := engineNames(200)
	base := randomWeights(r, len(all))
	full, err := Build(all[:150], base[:150], DefaultSlots)
	if err != nil {
		t.Fatal(err)
	}
	compact := full.Compact()
	hashes := make([]uint64, 20_000)
	for i := range hashes {
		hashes[i] = mix64(uint64(i) * 0x9e3779b97f4a7c15)
	}
	down := func(e int) bool { return e%7 == 0 }
	for step := range 20 {
		lo, hi := step%10, 150+step%50
		ws := make([]float64, hi-lo)
		for i := range ws {
			ws[i] = base[lo+i] * math.Exp(0.4*r.NormFloat64())
		}
		if full, err = full.Update(all[lo:hi], ws); err != nil {
			t.Fatal(err)
		}
		if compact, err = compact.Update(all[lo:hi], ws); err != nil {
			t.Fatal(err)
		}
		if compact.slots != nil {
			t.Fatal("the update of a compact table has a slot array")
		}
		if !compact.Equal(full) || !full.Equal(compact) || compact.Slots() != full.Slots() {
			t.Fatalf("step %d: compact and full tables differ", step)
		}
		for _, h := range hashes {
			if a, b := full.PickHash(h), compact.PickHash(h); a != b {
				t.Fatalf("step %d: hash %x picks %d, compact %d", step, h, a, b)
			}
			a, aok := full.PickSkip(h, down)
			b, bok := compact.PickSkip(h, down)
			if a != b || aok != bok {
				t.Fatalf("step %d: hash %x skips to %d, compact %d", step, h, a, b)
			}
		}
		for s := range full.Slots() {
			if full.PickHash(uint64(s)) != compact.PickHash(uint64(s)) {
				t.Fatalf("step %d: slot %d differs", step, s)
			}
		}
		_, _, _, a := full.Encode()
		_, _, _, b := compact.Encode()
		if string(a) != string(b) {
			t.Fatalf("step %d: encodings differ", step)
		}
		if MovedShare(full, compact) != 0 {
			t.Fatalf("step %d: MovedShare says they differ", step)
		}
	}
}
