package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type weights struct {
	version uint64
	name    string
}

func w(v uint64) *weights { return &weights{version: v, name: fmt.Sprint("v", v)} }

func TestSwapAppliesOnlyNewer(t *testing.T) {
	steps := []struct {
		version uint64
		nilV    bool
		applied bool
		current uint64
	}{
		{version: 0, applied: false, current: 0}, // 0 is never newer than the empty store
		{version: 5, applied: true, current: 5},
		{version: 5, applied: false, current: 5}, // equal
		{version: 3, applied: false, current: 5}, // older
		{version: 9, nilV: true, applied: false, current: 5},
		{version: 6, applied: true, current: 6},
		{version: 1 << 63, applied: true, current: 1 << 63},
	}
	var s snapshot.Store[weights]
	for i, st := range steps {
		v := w(st.version)
		if st.nilV {
			v = nil
		}
		if got := s.Swap(v, st.version); got != st.applied {
			t.Fatalf("step %d: Swap(v%d) = %v, want %v", i, st.version, got, st.applied)
		}
		cur, ver := s.Load()
		if ver != st.current || s.Version() != st.current {
			t.Fatalf("step %d: version %d, want %d", i, ver, st.current)
		}
		if ver > 0 && cur.version != ver {
			t.Fatalf("step %d: value %+v does not match version %d", i, cur, ver)
		}
	}
}

func TestZeroAndNew(t *testing.T) {
	var s snapshot.Store[weights]
	if v, ver := s.Load(); v != nil || ver != 0 {
		t.Fatalf("zero Store Load = %v, %d", v, ver)
	}
	n := snapshot.New(w(4), 4)
	if v, ver := n.Load(); ver != 4 || v.name != "v4" {
		t.Fatalf("New Load = %+v, %d", v, ver)
	}
	if n.Swap(w(4), 4) {
		t.Fatal("New: equal version applied")
	}
	if v, ver := snapshot.New[weights](nil, 0).Load(); v != nil || ver != 0 {
		t.Fatalf("New(nil) Load = %v, %d", v, ver)
	}
}

func TestWaitReturnsAtOnceWhenPresent(t *testing.T) {
	s := snapshot.New(w(7), 7)
	v, ver, err := s.Wait(t.Context(), 7)
	if err != nil || ver != 7 || v.version != 7 {
		t.Fatalf("Wait = %+v, %d, %v", v, ver, err)
	}
}

func TestWaitWakesOnlyAtMinVersion(t *testing.T) {
	var s snapshot.Store[weights]
	const waiters = 8
	got := make(chan uint64, waiters)
	for range waiters {
		go func() {
			_, ver, err := s.Wait(context.Background(), 3)
			if err != nil {
				t.Error(err)
			}
			got <- ver
		}()
	}
	s.Swap(w(1), 1)
	s.Swap(w(2), 2)
	select {
	case ver := <-got:
		t.Fatalf("a waiter for v3 returned at v%d", ver)
	case <-time.After(20 * time.Millisecond):
	}
	s.Swap(w(4), 4) // skipping 3 still satisfies ">= 3"
	for range waiters {
		select {
		case ver := <-got:
			if ver != 4 {
				t.Fatalf("waiter woke with v%d, want v4", ver)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by Swap")
		}
	}
}

func TestWaitZeroWaitsForFirstValue(t *testing.T) {
	var s snapshot.Store[weights]
	done := make(chan uint64, 1)
	go func() {
		_, ver, _ := s.Wait(context.Background(), 0)
		done <- ver
	}()
	s.Swap(w(2), 2)
	if ver := <-done; ver != 2 {
		t.Fatalf("Wait(0) returned v%d, want v2", ver)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	s := snapshot.New(w(1), 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	v, ver, err := s.Wait(ctx, 2)
	if !errors.Is(err, context.DeadlineExceeded) || v != nil || ver != 0 {
		t.Fatalf("Wait past deadline = %v, %d, %v", v, ver, err)
	}
}

// TestConcurrentReadersSeeConsistentNondecreasing runs readers against a
// writer that also tries stale versions; under -race this checks that
// Load needs no lock, and the assertions check that a reader never sees a
// value that does not belong to its version or a version going back.
func TestConcurrentReadersSeeConsistentNondecreasing(t *testing.T) {
	var s snapshot.Store[weights]
	const last = 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			var prev uint64
			for {
				v, ver := s.Load()
				if ver < prev {
					t.Errorf("version went back: %d after %d", ver, prev)
					return
				}
				if ver > 0 && v.version != ver {
					t.Errorf("value of v%d returned with version %d", v.version, ver)
					return
				}
				prev = ver
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	for v := uint64(1); v <= last; v++ {
		if !s.Swap(w(v), v) {
			t.Fatalf("Swap(v%d) refused", v)
		}
		if v > 1 && s.Swap(w(v-1), v-1) {
			t.Fatalf("stale Swap(v%d) applied", v-1)
		}
	}
	close(stop)
	wg.Wait()
	if s.Version() != last {
		t.Fatalf("final version %d, want %d", s.Version(), last)
	}
}

func BenchmarkLoad(b *testing.B) {
	s := snapshot.New(w(1), 1)
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		_, v := s.Load()
		sink += v
	}
	if sink == 0 {
		b.Fatal("no loads")
	}
}

func BenchmarkLoadParallelWithSwaps(b *testing.B) {
	s := snapshot.New(w(1), 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for v := uint64(2); ; v++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				s.Swap(w(v), v)
			}
		}
	})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if v, _ := s.Load(); v == nil {
				b.Error("nil value")
			}
		}
	})
	close(stop)
	wg.Wait()
}

func ExampleStore() {
	var s snapshot.Store[string]
	a, b := "weights A", "weights B"
	fmt.Println(s.Swap(&a, 2))
	fmt.Println(s.Swap(&b, 1)) // older: ignored
	v, ver := s.Load()
	fmt.Println(*v, ver)
	// Output:
	// true
	// false
	// weights A 2
}
