package backtest

import (
	"fmt"
	"testing"
	"time"
)

// TestJitterKeepsOrder: jittered arrivals move later by less than the
// jitter and never past the next request's arrival (a request sharing
// its stamp with the next keeps it), the same seed gives the same arrivals and another seed
// others, and 0 leaves the trace as it is.
func TestJitterKeepsOrder(t *testing.T) {
	arrivals := func(jitter time.Duration, seed uint64) []int64 {
		tr := synthetic(50, 3, 700*time.Microsecond, 5)
		tr.Requests = append(tr.Requests, tr.Requests[len(tr.Requests)-1]) // a shared stamp at the end
		jitterArrivals(tr, jitter, seed)
		out := make([]int64, len(tr.Requests))
		for i, r := range tr.Requests {
			out[i] = r.ArrivalNs
		}
		return out
	}
	orig := arrivals(0, 1)
	a, b, c := arrivals(time.Millisecond, 1), arrivals(time.Millisecond, 1), arrivals(time.Millisecond, 2)
	moved := 0
	for i := range orig {
		if d := a[i] - orig[i]; d < 0 || d >= int64(time.Millisecond) {
			t.Fatalf("request %d moved by %d ns, want [0, 1 ms)", i, d)
		}
		if i+1 < len(orig) && a[i] > orig[i+1] {
			t.Fatalf("request %d moved to %d, past the next arrival %d", i, a[i], orig[i+1])
		}
		if i > 0 && a[i] < a[i-1] {
			t.Fatalf("order changed at %d", i)
		}
		if a[i] != orig[i] {
			moved++
		}
	}
	if n := len(orig); a[n-2] != orig[n-2] {
		t.Errorf("a request sharing its stamp with the next moved: %d, want %d", a[n-2], orig[n-2])
	}
	if moved < len(orig)/2 {
		t.Errorf("only %d of %d arrivals moved", moved, len(orig))
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the same seed gave different arrivals")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("seeds 1 and 2 gave the same arrivals")
	}
}

// TestJitterMovesResults: with jitter, the seed changes a deterministic
// policy's result (the point of it); without, it does not; the summary
// reports the jitter.
func TestJitterMovesResults(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	res := func(jitter time.Duration, seed uint64) *Result {
		return run(t, f, synthetic(200, 3, 20*time.Millisecond, 40), func(c *Config) {
			c.Policies, c.Seed, c.Jitter = []string{PolicyLeastLoaded}, seed, jitter
		})
	}
	ttft := func(r *Result) float64 { return r.Policies[0].TTFTMs.Mean }
	if a, b := ttft(res(0, 1)), ttft(res(0, 2)); a != b {
		t.Errorf("without jitter the seed moved least-loaded's mean TTFT: %v and %v", a, b)
	}
	a, b := res(5*time.Millisecond, 1), res(5*time.Millisecond, 2)
	if ttft(a) == ttft(b) {
		t.Errorf("with jitter, seeds 1 and 2 gave the same mean TTFT %v", ttft(a))
	}
	if a.Trace.JitterMs != 5 {
		t.Errorf("summary jitter %v ms, want 5", a.Trace.JitterMs)
	}
}
