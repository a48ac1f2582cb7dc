package routing

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/ilb-router/ilb/solver/sched"
)

// TestSizesLargestFirst: with prompts of 2, 4, .., 512 tokens
// remembered, a share r sheds a prompt of odd length when fewer than
// r·257 − 1 remembered ones are larger, never when r·257 or more are,
// and by key in between.
func TestSizesLargestFirst(t *testing.T) {
	var s Sizes
	for k := 1; k <= SizesLen; k++ {
		s.Observe(2 * k)
	}
	for _, r := range []float64{0.01, 0.1, 0.5, 0.9} {
		quota := r * (SizesLen + 1)
		for tok := 1; tok <= 2*SizesLen+11; tok += 2 {
			larger := float64(max(SizesLen-tok/2, 0))
			for k := range 3 {
				h := sched.HashKey("k" + strconv.Itoa(k))
				want := sched.ShedKey(h, quota-larger)
				switch {
				case larger+1 <= quota:
					want = true
				case larger >= quota:
					want = false
				}
				if got := s.Largest(tok, h, r); got != want {
					t.Fatalf("r=%v tokens=%d (%v larger): Largest=%v, want %v", r, tok, larger, got, want)
				}
			}
		}
	}
}

// TestSizesTiesByKey: when every remembered prompt has one length, the
// prompts of that length are shed by key, as without Sizes; so are
// unknown lengths, an empty memory and a nil Sizes.
func TestSizesTiesByKey(t *testing.T) {
	var same, empty Sizes
	for range SizesLen {
		same.Observe(700)
	}
	var nilSizes *Sizes
	for i := range 5000 {
		h := sched.HashKey("conv-" + strconv.Itoa(i))
		for _, r := range []float64{0.05, 0.3} {
			want := sched.ShedKey(h, r)
			if same.Largest(700, h, r) != want || same.Largest(0, h, r) != want ||
				empty.Largest(700, h, r) != want || nilSizes.Largest(700, h, r) != want {
				t.Fatalf("key %d, r=%v: not shed by key (want %v)", i, r, want)
			}
		}
		if same.Largest(701, h, 0.05) != true || same.Largest(699, h, 0.3) != false {
			t.Fatalf("key %d: a longer prompt than all must be shed, a shorter one kept", i)
		}
	}
}

// TestSizesShedShare: on a heavy-tailed stream of prompts, the share of
// new conversations shed is the share asked for (refusing the largest
// does not refuse more of them), and raising the share only adds to
// the shed ones.
func TestSizesShedShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s Sizes
	const n = 40000
	shed := map[float64]int{}
	shares := []float64{0.02, 0.1, 0.3}
	for i := range n {
		tok := int(math.Exp(8 + 1.2*rng.NormFloat64()))
		h := sched.HashKey("c" + strconv.Itoa(i))
		prev := false
		for _, r := range shares {
			got := s.Largest(tok, h, r)
			if prev && !got {
				t.Fatalf("request %d shed at a lower share but not at %v", i, r)
			}
			if got {
				shed[r]++
			}
			prev = got
		}
		s.Observe(tok)
	}
	for _, r := range shares {
		if got := float64(shed[r]) / n; math.Abs(got-r) > 0.1*r {
			t.Errorf("share %v: shed %.4f of new conversations", r, got)
		}
	}
}

// TestSizesRingForgets: only the last SizesLen prompts count.
func TestSizesRingForgets(t *testing.T) {
	var s Sizes
	for range SizesLen {
		s.Observe(1_000_000) // old and long
	}
	for range SizesLen {
		s.Observe(10)
	}
	if !s.Largest(11, sched.HashKey("k"), 0.01) {
		t.Error("a prompt longer than every remembered one must be shed: the old long ones are forgotten")
	}
	s.Observe(0) // unknown: not remembered
	s.Observe(-3)
	if got := s.next.Load(); got != 2*SizesLen {
		t.Errorf("%d prompts remembered, want %d", got, 2*SizesLen)
	}
}

// TestSizesConcurrent runs Observe and Largest side by side (for -race).
func TestSizesConcurrent(t *testing.T) {
	var s Sizes
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				s.Observe(100 + i%50 + g)
				s.Largest(120, uint64(i), 0.2)
			}
		}()
	}
	wg.Wait()
	if s.next.Load() != 8000 {
		t.Errorf("%d observed, want 8000", s.next.Load())
	}
}

// BenchmarkSizes: what shedding the largest first adds to a new
// conversation's pick: Observe always, Largest while the cluster sheds
// (a scan of the SizesLen remembered lengths).
func BenchmarkSizes(b *testing.B) {
	var s Sizes
	rng := rand.New(rand.NewPCG(3, 4))
	toks := make([]int, 1024)
	for i := range toks {
		toks[i] = int(math.Exp(8 + 1.2*rng.NormFloat64()))
		s.Observe(toks[i])
	}
	b.Run("observe", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s.Observe(toks[i&1023])
		}
	})
	b.Run("largest", func(b *testing.B) {
		b.ReportAllocs()
		shed := 0
		for i := 0; b.Loop(); i++ {
			if s.Largest(toks[i&1023], uint64(i)*0x9e3779b97f4a7c15, 0.1) {
				shed++
			}
		}
		b.ReportMetric(float64(shed)/float64(b.N), "shed/op")
	})
}
