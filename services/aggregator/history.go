package aggregator

import (
	"slices"
	"sort"
	"sync"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
)

// history keeps the last windows of each engine as regression points:
// memory is engines x windows, never events. Rows come from this
// instance's own windows and from the windows the group published
// (readback); a window seen twice (an engine's window end) is kept once,
// so the two sources and a re-emission after a restart never count a
// window twice, and points are kept in window order whatever order they
// arrive in. The consumer loop and the read-back add; fits read a copy.
type history struct {
	size, maxEngines int
	windowNs         int64

	mu      sync.Mutex
	engines map[string]*ring
	gone    map[string]bool // engines removed from the fleet (fleet.go)
	dropped uint64          // windows of engines beyond maxEngines
}

func newHistory(size, maxEngines int, windowNs int64) *history {
	return &history{size: size, maxEngines: maxEngines, windowNs: windowNs, engines: map[string]*ring{}, gone: map[string]bool{}}
}

// historySlack is how many windows beyond size each ring keeps, so that
// a fit at an event time that later windows have already passed still
// sees size windows.
const historySlack = 32

// ring holds an engine's newest points by window end, oldest first; when
// full the oldest is dropped.
type ring struct {
	pts  []regress.Point
	ends []int64
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
	if h.gone[r.Engine] {
		return
	}
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
	rg.insert(r.WindowEndUnixNano, p)
}

// insert puts p at its place by window end; a window already held, or
// older than everything in a full ring, is ignored.
func (rg *ring) insert(end int64, p regress.Point) {
	i, found := slices.BinarySearch(rg.ends, end)
	switch {
	case found:
		return
	case len(rg.ends) == cap(rg.ends) && i == 0:
		return
	case len(rg.ends) == cap(rg.ends):
		copy(rg.ends, rg.ends[1:i])
		copy(rg.pts, rg.pts[1:i])
		i--
		rg.ends[i], rg.pts[i] = end, p
		return
	}
	rg.ends = slices.Insert(rg.ends, i, end)
	rg.pts = slices.Insert(rg.pts, i, p)
}

// earliest returns the earliest window end held; 0 when empty.
func (h *history) earliest() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out int64
	for _, rg := range h.engines {
		if len(rg.ends) > 0 && (out == 0 || rg.ends[0] < out) {
			out = rg.ends[0]
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
		n := sort.Search(len(rg.ends), func(i int) bool { return rg.ends[i] > upTo })
		pts := rg.pts[:n]
		if len(pts) > h.size {
			pts = pts[len(pts)-h.size:]
		}
		if len(pts) > 0 {
			out[e] = slices.Clone(pts)
		}
	}
	return out
}
