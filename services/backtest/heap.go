package backtest

// engineHeap is an indexed min-heap of engines by the time they next need
// attention; ties go to the lower engine index, so the loop's order is
// deterministic. Engines with nothing to do are not in it.
type engineHeap struct {
	items []int32 // engine indexes, heap-ordered
	at    []int64 // by engine: its time, valid while in the heap
	pos   []int32 // by engine: its place in items, -1 when absent
}

func newEngineHeap(n int) engineHeap {
	h := engineHeap{items: make([]int32, 0, n), at: make([]int64, n), pos: make([]int32, n)}
	for i := range h.pos {
		h.pos[i] = -1
	}
	return h
}

func (h *engineHeap) empty() bool { return len(h.items) == 0 }

// top returns the earliest engine and its time; call only when not empty.
func (h *engineHeap) top() (e int, at int64) {
	e = int(h.items[0])
	return e, h.at[e]
}

// set puts engine e in the heap at time t (busy) or removes it.
func (h *engineHeap) set(e int, t int64, busy bool) {
	p := h.pos[e]
	switch {
	case !busy && p < 0:
	case !busy:
		h.remove(int(p))
	case p < 0:
		h.at[e] = t
		h.pos[e] = int32(len(h.items))
		h.items = append(h.items, int32(e))
		h.up(len(h.items) - 1)
	default:
		old := h.at[e]
		h.at[e] = t
		if t < old {
			h.up(int(p))
		} else {
			h.down(int(p))
		}
	}
}

func (h *engineHeap) remove(i int) {
	last := len(h.items) - 1
	e := h.items[i]
	h.swap(i, last)
	h.items = h.items[:last]
	h.pos[e] = -1
	if i < last {
		h.down(i)
		h.up(i)
	}
}

func (h *engineHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	return h.at[a] < h.at[b] || (h.at[a] == h.at[b] && a < b)
}

func (h *engineHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i]] = int32(i)
	h.pos[h.items[j]] = int32(j)
}

func (h *engineHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *engineHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}
