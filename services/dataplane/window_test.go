package dataplane

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestRetryBudgetKnownAnswers(t *testing.T) {
	cfg := RetryConfig{Ratio: 0.2, MinPerSecond: 0, Window: 10 * time.Second, FullBelow: 0.5}
	for _, tc := range []struct {
		name        string
		min         float64
		utilisation float64
		requests    int
		want        int
	}{
		{"20% of 100", 0, 0, 100, 20},
		{"20% of 100 plus 1/s × 10 s", 1, 0, 100, 30},
		{"no requests, reserve only", 2, 0, 0, 20},
		{"utilisation 0.75 halves the ratio", 0, 0.75, 100, 10},
		{"utilisation 0.5 keeps the full ratio", 0, 0.5, 100, 20},
		{"full utilisation: no ratio", 0, 1, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.MinPerSecond = tc.min
			b := newRetryBudget(c, time.Second)
			b.setUtilisation(c, tc.utilisation)
			for range tc.requests {
				b.request()
			}
			got := 0
			for range 1000 {
				if b.tryRetry() {
					got++
				}
			}
			if got != tc.want {
				t.Fatalf("granted %d retries, want %d", got, tc.want)
			}
		})
	}
}

// TestRetryBudgetConcurrent: concurrent retries cannot overshoot.
func TestRetryBudgetConcurrent(t *testing.T) {
	c := RetryConfig{Ratio: 0.2, Window: 10 * time.Second}
	b := newRetryBudget(c, time.Second)
	for range 1000 {
		b.request()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 200 {
				if b.tryRetry() {
					n++
				}
			}
			mu.Lock()
			got += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if got != 200 {
		t.Fatalf("granted %d retries concurrently, want exactly 200", got)
	}
}

// TestRetryBudgetWindowSlides: requests older than the window no longer
// pay for retries.
func TestRetryBudgetWindowSlides(t *testing.T) {
	c := RetryConfig{Ratio: 0.5, Window: 3 * time.Second}
	b := newRetryBudget(c, time.Second)
	for range 10 {
		b.request()
	}
	for range 3 { // three ticks: the 10 requests fall out of the window
		b.w.advanceLocked()
	}
	if b.tryRetry() {
		t.Fatal("retry granted on requests older than the window")
	}
	for range 4 {
		b.request()
	}
	if !b.tryRetry() || !b.tryRetry() || b.tryRetry() {
		t.Fatal("want exactly 2 retries for 4 fresh requests at ratio 0.5")
	}
}

func TestRetryRatio(t *testing.T) {
	c := RetryConfig{Ratio: 0.2, FullBelow: 0.5}
	for _, tc := range []struct{ u, want float64 }{{0, 0.2}, {0.5, 0.2}, {0.75, 0.1}, {0.9, 0.04}, {1, 0}, {math.NaN(), 0.2}} {
		if got := retryRatio(c, tc.u); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ratio at utilisation %v = %v, want %v", tc.u, got, tc.want)
		}
	}
}

// TestThrottleProbability checks max(0, (requests − K·accepts)/(requests+1)).
func TestThrottleProbability(t *testing.T) {
	for _, tc := range []struct {
		requests, accepts int
		want              float64
	}{
		{0, 0, 0},
		{100, 0, 100.0 / 101},
		{100, 50, 0},
		{100, 40, 20.0 / 101},
		{100, 100, 0},
	} {
		th := newThrottle(ThrottleConfig{K: 2, Window: time.Minute}, time.Second)
		th.w.a.Store(int64(tc.requests))
		th.w.b.Store(int64(tc.accepts))
		if got := th.probability(); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%d requests %d accepts: p = %v, want %v", tc.requests, tc.accepts, got, tc.want)
		}
	}
	th := newThrottle(ThrottleConfig{K: 2, Window: time.Minute}, time.Second)
	th.w.a.Store(100)
	if th.admit(0.99) || !th.admit(0.999) {
		t.Fatal("admit does not compare the uniform draw with p")
	}
}

func TestConvoMemory(t *testing.T) {
	c := newConvos(64)
	m := memo{primary: 3, served: 5}
	c.record(0xabcdef0000000011, 10, m)
	if got, ok := c.lookup(0xabcdef0000000011, 10+convoEpochs); !ok || got != m {
		t.Fatalf("lookup within the idle time = %v %v", got, ok)
	}
	if _, ok := c.lookup(0xabcdef0000000011, 11+convoEpochs); ok {
		t.Fatal("conversation still ongoing past the idle time")
	}
	if _, ok := c.lookup(0x1bcdef0000000011, 10); ok {
		t.Fatal("a key with another tag in the same set looked ongoing")
	}
	// Four more keys in the same set: the oldest entry is evicted.
	for i := range 4 {
		c.record(uint64(i+1)<<40|0x11, uint8(20+i), memo{1, 1})
	}
	if _, ok := c.lookup(0xabcdef0000000011, 23); ok {
		t.Fatal("the least recently used entry was not evicted")
	}
	for i := range 4 {
		if _, ok := c.lookup(uint64(i+1)<<40|0x11, 23); !ok {
			t.Fatalf("recent key %d evicted", i)
		}
	}
}
