package window

import (
	"slices"
	"strings"
)

// Windower assigns events to event-time windows and keeps one accumulator
// of type A per key per window. See the package doc.
type Windower[A any] struct {
	// Immutable after New.
	size, hop, ooo, lateness int64
	span                     int64 // windows per event: size/hop
	maxKeys                  int
	maxParts                 int32
	reset                    func(*A)

	// Event time. closed and emitted are window indices: windows with a
	// smaller index are closed to new events (closed) or have been handed
	// to Drain or Flush (emitted). emitted <= closed.
	started bool
	wm      int64
	closed  int64
	emitted int64

	wins []*win[A] // windows not yet emitted, by index
	free []*win[A]
	hot  *win[A] // the window used last, or nil

	// Offsets (offsets.go).
	parts         []partState // by partition number
	steps         []step
	freePos       [][]int64
	replayPending int

	stats Stats
}

// New returns an empty Windower. reset must bring an accumulator back to
// its empty state, keeping any memory it owns so that reuse does not
// allocate; nil means assign the zero value.
func New[A any](cfg Config, reset func(*A)) (*Windower[A], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reset == nil {
		reset = func(a *A) { var zero A; *a = zero }
	}
	return &Windower[A]{
		size:     int64(cfg.Size),
		hop:      int64(cfg.Hop),
		ooo:      int64(cfg.OutOfOrder),
		lateness: int64(cfg.AllowedLateness),
		span:     int64(cfg.Size / cfg.Hop),
		maxKeys:  cfg.MaxKeysPerWindow,
		maxParts: cfg.MaxPartitions,
		reset:    reset,
	}, nil
}

// Add routes one event to its windows: fn is called once with the key's
// accumulator in each window of the event that is still open. It returns
// what it did; every event is counted in Stats whatever the outcome.
func (w *Windower[A]) Add(pos Position, eventTimeNs int64, key string, fn func(*A)) Outcome {
	w.stats.Events++
	ps, out := w.track(pos)
	if out != 0 {
		return out
	}
	if eventTimeNs < 0 || eventTimeNs > MaxEventTimeNs {
		w.stats.Invalid++
		w.skip(ps, pos)
		return Invalid
	}
	w.advance(eventTimeNs - w.ooo)
	if ps != nil && !ps.seen {
		w.firstSight(ps)
	}
	var p plan
	if ps != nil && pos.Offset <= ps.replayTo {
		p = w.replayPlan(ps, pos, eventTimeNs)
	} else {
		p = w.livePlan(eventTimeNs)
	}
	out = w.apply(p, pos, key, fn)
	if ps != nil {
		w.moved(ps, pos.Offset)
	}
	return out
}

// plan says which windows one event updates: indices from..to get the
// event, and late (if set) gets one late count.
type plan struct {
	from, to   int64
	late       bool
	lateTarget int64
	replay     bool
}

func (w *Windower[A]) livePlan(t int64) plan {
	to := floorDiv(t, w.hop)
	first := to - w.span + 1
	return plan{from: max(first, w.closed), to: to, late: first < w.closed, lateTarget: w.closed}
}

func (w *Windower[A]) apply(p plan, pos Position, key string, fn func(*A)) Outcome {
	applied, refused := 0, 0
	for j := p.from; j <= p.to; j++ {
		wn := w.window(j)
		s := wn.slot(key, w.maxKeys)
		if s < 0 {
			refused++
			continue
		}
		fn(&wn.accs[s])
		wn.note(pos)
		applied++
	}
	if p.late {
		if !p.replay {
			w.stats.Late++
		}
		wn := w.window(p.lateTarget)
		if s := wn.slot(key, w.maxKeys); s >= 0 {
			wn.late[s]++
			wn.note(pos)
		} else {
			refused++
		}
	}
	w.stats.Overflow += uint64(refused)
	switch {
	case applied > 0:
		w.stats.Applied++
		return Applied
	case p.replay:
		return Replayed
	case p.late:
		return Late
	}
	return Overflow
}

// advance moves the watermark forward to wm (never back) and closes the
// windows it passes.
func (w *Windower[A]) advance(wm int64) {
	if w.started && wm <= w.wm {
		return
	}
	w.wm = wm
	c := floorDiv(wm-w.size-w.lateness, w.hop) + 1
	if !w.started {
		w.started, w.closed, w.emitted = true, c, c
		return
	}
	if c > w.closed {
		w.closed = c
		w.recordStep()
	}
}

// AdvanceWatermark moves the watermark to at least wmNs, closing the
// windows it passes, as if an event at wmNs+OutOfOrder had arrived. A
// service calls it when a source goes idle, with a time from its clock.
func (w *Windower[A]) AdvanceWatermark(wmNs int64) {
	w.advance(min(max(wmNs, -MaxEventTimeNs), MaxEventTimeNs))
}

// Watermark returns the watermark, and false before any event.
func (w *Windower[A]) Watermark() (int64, bool) { return w.wm, w.started }

// Stats returns the counters.
func (w *Windower[A]) Stats() Stats { return w.stats }

// Ready reports whether Drain would emit something now.
func (w *Windower[A]) Ready() bool {
	return w.replayPending == 0 && len(w.wins) > 0 && w.wins[0].idx < w.closed
}

// Drain emits every closed window, oldest first, keys in sorted order
// within a window, and returns how many windows it emitted. A window is
// emitted exactly once. Closed windows wait for Drain, so call it after
// every batch of events to keep memory bounded. While a replay after
// Restore is in progress (package doc) Drain emits nothing.
func (w *Windower[A]) Drain(emit func(Entry[A])) int {
	if w.replayPending > 0 {
		return 0
	}
	n := w.emitBefore(w.closed, emit)
	if w.started {
		w.emitted = max(w.emitted, w.closed)
	}
	w.pruneSteps()
	return n
}

// Flush emits every window, open or not, as Drain does, and closes them:
// later events for them count as late. It is for the end of a bounded
// stream (a replay, a backtest); a service stopping for a restart should
// not flush (package doc). Flush ends any replay in progress.
func (w *Windower[A]) Flush(emit func(Entry[A])) int {
	w.EndReplay()
	end := w.closed
	if len(w.wins) > 0 {
		end = max(end, w.wins[len(w.wins)-1].idx+1)
	}
	n := w.emitBefore(end, emit)
	if w.started && end > w.closed {
		w.closed = end
		w.recordStep()
	}
	w.emitted = max(w.emitted, w.closed)
	return n
}

func (w *Windower[A]) emitBefore(end int64, emit func(Entry[A])) int {
	n := 0
	for len(w.wins) > 0 && w.wins[0].idx < end {
		wn := w.wins[0]
		w.emitWindow(wn, emit)
		w.wins = slices.Delete(w.wins, 0, 1)
		w.recycle(wn)
		n++
	}
	w.hot = nil
	w.stats.Windows += uint64(n)
	return n
}

func (w *Windower[A]) emitWindow(wn *win[A], emit func(Entry[A])) {
	start := wn.idx * w.hop
	b := Bounds{StartNs: start, EndNs: start + w.size}
	wn.order = wn.order[:0]
	for i := range wn.keys {
		wn.order = append(wn.order, int32(i))
	}
	keys := wn.keys
	slices.SortFunc(wn.order, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	for _, s := range wn.order {
		emit(Entry[A]{Window: b, Key: wn.keys[s], Late: wn.late[s], Acc: &wn.accs[s]})
	}
	w.stats.Entries += uint64(len(wn.order))
}

// window returns the window with index j, creating it if needed.
func (w *Windower[A]) window(j int64) *win[A] {
	if w.hot != nil && w.hot.idx == j {
		return w.hot
	}
	i := len(w.wins)
	for i > 0 && w.wins[i-1].idx > j {
		i--
	}
	if i > 0 && w.wins[i-1].idx == j {
		w.hot = w.wins[i-1]
		return w.hot
	}
	var wn *win[A]
	if n := len(w.free); n > 0 {
		wn, w.free = w.free[n-1], w.free[:n-1]
	} else {
		wn = &win[A]{slots: make(map[string]int32)}
	}
	wn.idx = j
	w.wins = slices.Insert(w.wins, i, wn)
	w.hot = wn
	return wn
}

func (w *Windower[A]) recycle(wn *win[A]) {
	for i := range wn.keys {
		w.reset(&wn.accs[i])
		wn.late[i] = 0
	}
	wn.keys = wn.keys[:0]
	clear(wn.slots)
	for i := range wn.minOff {
		wn.minOff[i] = noOffset
	}
	w.free = append(w.free, wn)
}

// win is one window's state. accs and late are parallel to keys up to
// len(keys); beyond it they hold reset accumulators kept for reuse.
type win[A any] struct {
	idx    int64
	slots  map[string]int32
	keys   []string
	accs   []A
	late   []uint64
	minOff []int64 // by partition: the smallest offset applied here
	order  []int32 // scratch for emission
}

func (wn *win[A]) slot(key string, maxKeys int) int {
	if s, ok := wn.slots[key]; ok {
		return int(s)
	}
	s := len(wn.keys)
	if s >= maxKeys {
		return -1
	}
	wn.keys = append(wn.keys, key)
	if s == len(wn.accs) {
		var zero A
		wn.accs = append(wn.accs, zero)
		wn.late = append(wn.late, 0)
	}
	wn.slots[key] = int32(s)
	return s
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
