package backtest

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress writes one line per policy every interval of wall time. It is
// shared by the simulations running at once; its lock is taken only when
// a line is due (once per 4096 loop steps it reads the clock).
type progress struct {
	w        io.Writer
	clock    func() time.Time
	interval time.Duration

	mu          sync.Mutex
	start, last map[string]time.Time // by policy
}

func newProgress(w io.Writer, clock func() time.Time, interval time.Duration) *progress {
	if w == nil {
		return nil
	}
	return &progress{w: w, clock: clock, interval: interval, start: map[string]time.Time{}, last: map[string]time.Time{}}
}

// maybe writes a line for policy if one is due.
func (p *progress) maybe(policy string, simNs int64, done, total int) {
	if p == nil {
		return
	}
	now := p.clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[policy]
	if !ok {
		p.start[policy], p.last[policy] = now, now
		return
	}
	if now.Sub(last) < p.interval {
		return
	}
	p.last[policy] = now
	wall := now.Sub(p.start[policy]).Seconds()
	fmt.Fprintf(p.w, "backtest: %-12s sim %8.1fs  %d/%d requests (%.0f%%)  %.0f req/s wall\n",
		policy, float64(simNs)/1e9, done, total, 100*float64(done)/float64(max(total, 1)), float64(done)/max(wall, 1e-9))
}
