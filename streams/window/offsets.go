package window

import "math"

// noOffset marks "no offset" in a window's per-partition minimum.
const noOffset = math.MaxInt64

// partState is what the Windower knows of one source partition.
type partState struct {
	seen bool
	// last is the last offset processed in this session; after Restore it
	// starts at the restored commit - 1, so older offsets are duplicates.
	last int64
	// replayTo is the last offset processed before Restore while offsets
	// up to it are being re-delivered, and -1 otherwise.
	replayTo       int64
	restoredCommit int64
	// base is the closed window index for every event of this partition
	// past the steps that were folded away (or, for a partition first seen
	// after them, the index when it was first seen).
	base int64
}

// position is the last offset processed, counting those processed before
// Restore.
func (ps *partState) position() int64 { return max(ps.last, ps.replayTo) }

// step records that the closed index became closed right after each
// partition had been processed up to pos[partition]. Any event processed
// later was classified against it. Together the steps let a replay after
// Restore classify a re-delivered event exactly as it was the first time,
// whatever the interleaving of partitions (offsets in one partition are
// processed in order).
type step struct {
	closed int64
	pos    []int64 // by partition number; -1 (or missing) = not seen yet
}

func (s *step) at(p int) int64 {
	if p < len(s.pos) {
		return s.pos[p]
	}
	return -1
}

// Commit is the offset a consumer may commit for one partition: the next
// offset to read after a restart. Every window an earlier offset
// contributed to has been emitted.
type Commit struct {
	Partition int32
	Offset    int64
}

// track checks an event's position: nil for an untracked event, or the
// partition's state; a non-zero Outcome means skip the event.
func (w *Windower[A]) track(pos Position) (*partState, Outcome) {
	if pos.Offset < 0 {
		return nil, 0
	}
	if pos.Partition < 0 || pos.Partition >= w.maxParts {
		w.stats.Invalid++
		return nil, Invalid
	}
	p := int(pos.Partition)
	if p >= len(w.parts) {
		w.parts = append(w.parts, make([]partState, p+1-len(w.parts))...)
	}
	ps := &w.parts[p]
	if ps.seen && pos.Offset <= ps.last {
		w.stats.Duplicates++
		return nil, Duplicate
	}
	return ps, 0
}

func (w *Windower[A]) firstSight(ps *partState) {
	*ps = partState{seen: true, last: -1, replayTo: -1, restoredCommit: -1, base: w.closed}
}

// Skip records that the offset at pos was consumed without an event for
// the Windower (it failed decoding and went to a dead-letter queue, say),
// so that commits move past it. It is a no-op for an untracked position, an
// offset already processed, or a partition not seen yet.
func (w *Windower[A]) Skip(pos Position) {
	if pos.Offset < 0 || pos.Partition < 0 || int(pos.Partition) >= len(w.parts) {
		return
	}
	if ps := &w.parts[pos.Partition]; ps.seen && pos.Offset > ps.last {
		w.moved(ps, pos.Offset)
	}
}

func (w *Windower[A]) skip(ps *partState, pos Position) {
	if ps != nil && ps.seen {
		w.moved(ps, pos.Offset)
	}
}

// moved records that offset o of the partition has been processed.
func (w *Windower[A]) moved(ps *partState, o int64) {
	ps.last = o
	if ps.replayTo >= 0 && o >= ps.replayTo {
		ps.replayTo = -1
		w.replayPending--
	}
}

// replayPlan classifies a re-delivered event as it was classified before
// Restore, and keeps only what went to windows not yet emitted.
func (w *Windower[A]) replayPlan(ps *partState, pos Position, t int64) plan {
	w.stats.Replayed++
	to := floorDiv(t, w.hop)
	first := to - w.span + 1
	co := w.closedAt(ps, int(pos.Partition), pos.Offset)
	return plan{
		from:       max(first, co, w.emitted),
		to:         to,
		late:       first < co && co >= w.emitted,
		lateTarget: co,
		replay:     true,
	}
}

// closedAt returns the closed index when offset o of partition p was
// first processed.
func (w *Windower[A]) closedAt(ps *partState, p int, o int64) int64 {
	for i := len(w.steps) - 1; i >= 0; i-- {
		if w.steps[i].at(p) < o {
			return max(ps.base, w.steps[i].closed)
		}
	}
	return ps.base
}

func (w *Windower[A]) recordStep() {
	if len(w.parts) == 0 {
		return
	}
	var pos []int64
	if n := len(w.freePos); n > 0 {
		pos, w.freePos = w.freePos[n-1][:0], w.freePos[:n-1]
	}
	for i := range w.parts {
		v := int64(-1)
		if w.parts[i].seen {
			v = w.parts[i].position()
		}
		pos = append(pos, v)
	}
	w.steps = append(w.steps, step{closed: w.closed, pos: pos})
}

// pruneSteps folds away the steps every partition's committed offset has
// passed: no future replay can start before them.
func (w *Windower[A]) pruneSteps() {
	if len(w.steps) < 16 {
		return
	}
	k := 0
	for k < len(w.steps)-1 && w.stepPassed(&w.steps[k]) {
		k++
	}
	if k == 0 {
		return
	}
	for i := range w.parts {
		w.parts[i].base = max(w.parts[i].base, w.steps[k-1].closed)
	}
	for i := 0; i < k; i++ {
		w.freePos = append(w.freePos, w.steps[i].pos)
	}
	w.steps = append(w.steps[:0], w.steps[k:]...)
}

func (w *Windower[A]) stepPassed(s *step) bool {
	for p := range w.parts {
		if w.parts[p].seen && s.at(p) >= w.commitOf(p) {
			return false
		}
	}
	return true
}

// commitOf returns the committable offset of a seen partition.
func (w *Windower[A]) commitOf(p int) int64 {
	ps := &w.parts[p]
	if ps.replayTo >= 0 {
		return ps.restoredCommit
	}
	m := int64(noOffset)
	for _, wn := range w.wins {
		if p < len(wn.minOff) {
			m = min(m, wn.minOff[p])
		}
	}
	if m == noOffset {
		return ps.position() + 1
	}
	return m
}

// Commits appends, for every partition seen, the offset a consumer may
// commit now, in partition order. Windows closed but not yet drained still
// hold their offsets back: call it after Drain, and commit only once what
// Drain emitted is durably published.
func (w *Windower[A]) Commits(dst []Commit) []Commit {
	for p := range w.parts {
		if w.parts[p].seen {
			dst = append(dst, Commit{Partition: int32(p), Offset: w.commitOf(p)})
		}
	}
	return dst
}

// Replaying reports whether re-delivered offsets are still awaited after
// Restore; Drain emits nothing until they have arrived.
func (w *Windower[A]) Replaying() bool { return w.replayPending > 0 }

// EndReplay stops waiting for re-delivered offsets (for a partition that
// was revoked, or whose records expired): windows they would have rebuilt
// are emitted without them, and such offsets count as duplicates if they
// come later.
func (w *Windower[A]) EndReplay() {
	for i := range w.parts {
		ps := &w.parts[i]
		if ps.replayTo >= 0 {
			ps.last = ps.position()
			ps.replayTo = -1
		}
	}
	w.replayPending = 0
}

// note records that an event at pos contributed to the window.
func (wn *win[A]) note(pos Position) {
	if pos.Offset < 0 {
		return
	}
	p := int(pos.Partition)
	for len(wn.minOff) <= p {
		wn.minOff = append(wn.minOff, noOffset)
	}
	wn.minOff[p] = min(wn.minOff[p], pos.Offset)
}
