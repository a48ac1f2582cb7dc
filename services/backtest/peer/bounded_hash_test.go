package peer

import "testing"

// The bound is ⌈1.25·(total+1)/n⌉.
func TestBoundedHashBound(t *testing.T) {
	for _, tc := range []struct{ total, n, want int }{
		{0, 4, 1}, {7, 4, 3}, {8, 4, 3}, {12, 4, 5}, {15, 4, 5}, {16, 4, 6}, {3, 1, 5},
	} {
		if got := bound(tc.total, tc.n); got != tc.want {
			t.Errorf("bound(%d, %d) = %d, want %d", tc.total, tc.n, got, tc.want)
		}
	}
}

// A key goes to the first engine clockwise from it whose load is below
// the bound; an engine at the bound passes it on to the next one.
func TestBoundedHashWalk(t *testing.T) {
	r, _ := boundedHashPolicy().New(testFleet(4, 64, 500_000, 9000), 0, 1)
	b := r.(*boundedHash)
	v := newTestView(4)
	req := &Request{Key: 42}
	owner := b.Pick(v, req)
	b.inflight[owner]-- // undo
	if again := b.Pick(v, req); again != owner {
		t.Fatalf("same key, same loads: %d then %d", owner, again)
	}
	b.inflight[owner]--
	// Loads 2 on the owner, 0 elsewhere: total 2, bound ⌈3.75/4⌉ = 1, so
	// the owner (2 >= 1) is skipped for the next engine on the ring.
	b.inflight[owner] = 2
	start, key := 0, mix64(42) // the first point at or after the key, else the ring's start
	for k, p := range b.ring {
		if p.hash >= key {
			start = k
			break
		}
	}
	want := -1
	for j := range b.ring {
		if e := b.ring[(start+j)%len(b.ring)].engine; int(e) != owner {
			want = int(e)
			break
		}
	}
	if got := b.Pick(v, req); got != want || got == owner {
		t.Fatalf("owner %d at the bound: picked %d, want the next clockwise %d", owner, got, want)
	}
	// An unhealthy owner is skipped as well.
	b.inflight[owner] = 0
	v.down[owner] = true
	if got := b.Pick(v, req); got == owner {
		t.Fatal("picked the unhealthy owner")
	}
}
