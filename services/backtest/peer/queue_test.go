package peer

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQueueIsAFIFO drives a queue and a plain slice with the same
// random pushes, pops and filters, across the ring's wrap-around and
// growth, and compares them after every step.
func TestQueueIsAFIFO(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q queue[int]
	var want []int
	next := 0
	for step := range 20000 {
		switch k := r.IntN(100); {
		case k < 55:
			q.push(next)
			want = append(want, next)
			next++
		case k < 99 && len(want) > 0:
			q.pop()
			want = want[1:]
		case k == 99:
			m := r.IntN(5) + 2
			q.filter(func(x int) bool { return x%m != 0 })
			want = slices.DeleteFunc(want, func(x int) bool { return x%m == 0 })
		}
		if q.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(want))
		}
		for i, x := range want {
			if q.at(i) != x {
				t.Fatalf("step %d: element %d is %d, want %d", step, i, q.at(i), x)
			}
		}
	}
}
