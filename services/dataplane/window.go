package dataplane

import (
	"math"
	"sync/atomic"
	"time"
)

// window counts two kinds of events over a sliding window without a lock:
// the request path adds to cumulative atomic counters, and the owner tick
// records the counters once per tick in a ring, publishing the values of
// one window ago as the base. Counts in the window are cumulative − base.
// Before a whole window has passed the base is 0 (everything counts).
type window struct {
	a, b         atomic.Int64 // cumulative counts; hot path
	baseA, baseB atomic.Int64 // counts one window ago; set by advance

	// Guarded by DataPlane.mu.
	ring [][2]int64
	pos  int
}

func newWindow(span, tick time.Duration) *window {
	n := max(1, int(math.Ceil(float64(span)/float64(tick))))
	return &window{ring: make([][2]int64, n)}
}

// advanceLocked records the current counts and moves the base to the
// oldest record, which is one window old.
func (w *window) advanceLocked() {
	w.ring[w.pos] = [2]int64{w.a.Load(), w.b.Load()}
	w.pos = (w.pos + 1) % len(w.ring)
	old := w.ring[w.pos]
	w.baseA.Store(old[0])
	w.baseB.Store(old[1])
}

// counts returns the events of each kind in the window.
func (w *window) counts() (a, b int64) {
	return w.a.Load() - w.baseA.Load(), w.b.Load() - w.baseB.Load()
}

// retryBudget caps retries: within any window, retries ≤ ratio × requests
// + reserve. ratio is set by the owner from utilisation (it shrinks as
// engines fill up); the reserve (MinPerSecond × Window) lets quiet
// clusters retry at all. A retry is granted by compare-and-swap, so
// concurrent retries cannot overshoot the cap.
type retryBudget struct {
	w            *window      // a: requests, b: granted retries
	ratioMicro   atomic.Int64 // current ratio × 1e6
	reserveMicro int64        // reserve × 1e6
	denied       atomic.Int64
}

func newRetryBudget(c RetryConfig, tick time.Duration) *retryBudget {
	b := &retryBudget{w: newWindow(c.Window, tick)}
	b.reserveMicro = int64(math.Round(c.MinPerSecond * c.Window.Seconds() * 1e6))
	b.ratioMicro.Store(int64(math.Round(c.Ratio * 1e6)))
	return b
}

// request counts one original (non-retry) request.
func (b *retryBudget) request() { b.w.a.Add(1) }

// tryRetry spends one retry if the budget allows it.
func (b *retryBudget) tryRetry() bool {
	for {
		cum := b.w.b.Load()
		reqs := b.w.a.Load() - b.w.baseA.Load()
		used := cum - b.w.baseB.Load()
		if (used+1)*1e6 > b.ratioMicro.Load()*reqs+b.reserveMicro {
			b.denied.Add(1)
			return false
		}
		if b.w.b.CompareAndSwap(cum, cum+1) {
			return true
		}
	}
}

// setUtilisation sets the ratio for utilisation u in [0, 1]: the full
// ratio up to c.FullBelow, then linearly down to 0 at u = 1.
func (b *retryBudget) setUtilisation(c RetryConfig, u float64) {
	b.ratioMicro.Store(int64(math.Round(retryRatio(c, u) * 1e6)))
}

func retryRatio(c RetryConfig, u float64) float64 {
	if !(u > c.FullBelow) {
		return c.Ratio
	}
	return c.Ratio * max(0, (1-u)/(1-c.FullBelow))
}

// throttle is Google SRE client-side throttling: with requests and
// accepts counted over the window, a new request is rejected locally with
// probability max(0, (requests − K·accepts) / (requests + 1)). A request
// counts when its outcome is known (answered, failed, or rejected
// locally), so long streams in flight do not look like rejections; locally
// rejected requests count too, so the probability settles where the
// engines accept what is sent.
type throttle struct {
	w *window // a: requests with an outcome, b: accepted by an engine
	k float64
}

func newThrottle(c ThrottleConfig, tick time.Duration) *throttle {
	return &throttle{w: newWindow(c.Window, tick), k: c.K}
}

func (t *throttle) probability() float64 {
	reqs, accepts := t.w.counts()
	return max(0, (float64(reqs)-t.k*float64(accepts))/float64(reqs+1))
}

// admit reports whether a request may go out, given a uniform random
// number in [0, 1); a rejected request is counted at once.
func (t *throttle) admit(u float64) bool {
	if u < t.probability() {
		t.w.a.Add(1)
		return false
	}
	return true
}

// outcome counts a request sent to an engine: accepted unless the engine
// signalled overload (429, 503) or could not be reached.
func (t *throttle) outcome(accepted bool) {
	t.w.a.Add(1)
	if accepted {
		t.w.b.Add(1)
	}
}
