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

// ring is a fixed-size circular buffer of points, oldest overwritten.
type ring struct {
	pts  []regress.Point
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
		rg = &ring{pts: make([]regress.Point, 0, h.size)}
		h.engines[r.Engine] = rg
	}
	if len(rg.pts) < h.size {
		rg.pts = append(rg.pts, p)
		return
	}
	rg.pts[rg.next] = p
	rg.next = (rg.next + 1) % h.size
}

// snapshot copies every engine's points, oldest first.
func (h *history) snapshot() map[string][]regress.Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]regress.Point, len(h.engines))
	for e, rg := range h.engines {
		pts := make([]regress.Point, 0, len(rg.pts))
		pts = append(pts, rg.pts[rg.next:]...)
		out[e] = append(pts, rg.pts[:rg.next]...)
	}
	return out
}
