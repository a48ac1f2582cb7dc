package optimizer

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for lease expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLeaseOneHolderAtATime(t *testing.T) {
	p, js := newPublisher(t, "a")
	q := openPublisher(t, js, "b")
	ctx := testCtx(t, 10*time.Second)
	clock := &fakeClock{t: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)}
	a := newLease(p, "a", 9*time.Second, clock.now)
	b := newLease(q, "b", 9*time.Second, clock.now)
	step := func(l *lease) bool {
		t.Helper()
		held, err := l.step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	if !step(a) || step(b) {
		t.Fatal("first claim: want a to hold and b not")
	}
	clock.add(3 * time.Second)
	if !step(a) || step(b) {
		t.Fatal("after a renewal: want a to keep it")
	}
	clock.add(8 * time.Second) // a renewed 8 s ago: lease still valid
	if step(b) {
		t.Fatal("b took a lease that had not expired")
	}
	clock.add(2 * time.Second) // 10 s since a's last renewal: expired
	if a.held(clock.now()) {
		t.Fatal("a still believes it leads past its lease")
	}
	if !step(b) {
		t.Fatal("b could not take an expired lease")
	}
	if step(a) {
		t.Fatal("a took the lease back from b")
	}
	if err := b.release(ctx); err != nil {
		t.Fatal(err)
	}
	if !step(a) {
		t.Fatal("a could not take a released lease at once")
	}
}

func TestLeaseRacersOneWins(t *testing.T) {
	p, js := newPublisher(t, "r0")
	ctx := testCtx(t, 10*time.Second)
	const racers = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for i := range racers {
		pub := p
		if i > 0 {
			pub = openPublisher(t, js, "r")
		}
		l := newLease(pub, string(rune('a'+i)), 5*time.Second, time.Now)
		wg.Go(func() {
			held, err := l.step(ctx)
			if err != nil {
				t.Error(err)
			}
			if held {
				mu.Lock()
				winners++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if winners != 1 {
		t.Fatalf("%d racers hold the lease, want exactly 1", winners)
	}
}
