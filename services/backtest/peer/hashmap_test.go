package peer

import (
	"math/rand/v2"
	"testing"
)

// The table agrees with a Go map over random puts and deletes, sequential
// keys (as trace block ids are) included.
func TestHashMapAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := newHashMap(0)
	ref := map[uint64]int32{}
	for i := range 200_000 {
		k := uint64(rng.IntN(5000))
		if i%3 == 0 {
			k = uint64(i % 7000) // runs of sequential ids
		}
		switch rng.IntN(3) {
		case 0, 1:
			m.put(k, int32(i))
			ref[k] = int32(i)
		case 2:
			m.del(k)
			delete(ref, k)
		}
	}
	if m.len() != len(ref) {
		t.Fatalf("len %d, want %d", m.len(), len(ref))
	}
	for k := range uint64(8000) {
		got, ok := m.get(k)
		want, wok := ref[k]
		if ok != wok || got != want {
			t.Fatalf("key %d: got %d,%v want %d,%v", k, got, ok, want, wok)
		}
	}
}
