package aggregator

import (
	"sync"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
)

// history keeps the last windows of each engine as regression points:
// memory is engines x windows, never events. The consumer loop adds, the
// profile loop reads a copy.
type history struct {
	size, maxEngines int
	windowNs         int64

	mu      sync.Mutex
	engines map[string]*ring
	dropped uint64 // windows of engines beyond maxEngines
}

func newHistory(size, maxEngines int, windowNs int64) *history {
	return &history{size: size, maxEngines: maxEngines, windowNs: windowNs, engines: map[string]*ring{}}
}

// historySlack is how many windows beyond size each ring keeps, so that
// a fit at an event time that later windows have already passed still
// sees size windows.
const historySlack = 32

// ring is a fixed-size circular buffer of points with their window ends,
// oldest overwritten.
type ring struct {
	pts  []regress.Point
	ends []int64
	next int
}

// addRow adds an engine row (Cluster empty) that saw completions. With
// hopping windows only windows starting at a multiple of the window
// length are kept, so that no request is counted in two points.
func (h *history) addRow(r *schemas.Feature) {
	if r.Cluster != "" || r.Requests == 0 || r.WindowStartUnixNano%h.windowNs != 0 {
		return
	}
	p := regress.Point{LoadRPS: r.ArrivalRPS, TTFTMs: r.TTFTP50Ms, TBOTMs: r.TBOTP50Ms, Weight: float64(r.Requests)}
	h.mu.Lock()
	defer h.mu.Unlock()
	rg := h.engines[r.Engine]
	if rg == nil {
		if len(h.engines) >= h.maxEngines {
			h.dropped++
			return
		}
		n := h.size + historySlack
		rg = &ring{pts: make([]regress.Point, 0, n), ends: make([]int64, 0, n)}
		h.engines[r.Engine] = rg
	}
	if len(rg.pts) < cap(rg.pts) {
		rg.pts = append(rg.pts, p)
		rg.ends = append(rg.ends, r.WindowEndUnixNano)
		return
	}
	rg.pts[rg.next], rg.ends[rg.next] = p, r.WindowEndUnixNano
	rg.next = (rg.next + 1) % len(rg.pts)
}

// earliest returns the earliest window end held; 0 when empty.
func (h *history) earliest() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out int64
	for _, rg := range h.engines {
		for _, e := range rg.ends {
			if out == 0 || e < out {
				out = e
			}
		}
	}
	return out
}

// snapshot copies, for every engine, its newest size points of windows
// ending at or before upTo, oldest first.
func (h *history) snapshot(upTo int64) map[string][]regress.Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]regress.Point, len(h.engines))
	for e, rg := range h.engines {
		var pts []regress.Point
		n := len(rg.pts)
		for i := range n {
			j := (rg.next + i) % n
			if rg.ends[j] <= upTo {
				pts = append(pts, rg.pts[j])
			}
		}
		if len(pts) > h.size {
			pts = pts[len(pts)-h.size:]
		}
		if len(pts) > 0 {
			out[e] = pts
		}
	}
	return out
}
