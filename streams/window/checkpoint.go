package window

import (
	"errors"
	"fmt"
)

// Checkpoint is what a restarted Windower needs so that events re-delivered
// from the committed offsets neither double count nor go missing (see the
// package doc). Its size is O(partitions x windows that a replay can still
// reach), independent of the number of events.
type Checkpoint struct {
	SizeNs, HopNs int64 // must match the Config of the Windower restoring it
	Started       bool  // false: no event had been seen; the rest is empty
	WatermarkNs   int64
	// Windows starting before ClosedStartNs were closed to new events;
	// windows starting before EmittedStartNs had been emitted.
	ClosedStartNs  int64
	EmittedStartNs int64
	Partitions     []PartitionCheckpoint // by increasing partition number
	Steps          []StepCheckpoint      // by increasing ClosedStartNs
}

// PartitionCheckpoint is one source partition in a Checkpoint.
type PartitionCheckpoint struct {
	Partition int32
	Commit    int64 // the offset to resume from (what Commits returned)
	Position  int64 // the last offset processed; offsets Commit..Position are replayed
	// ClosedStartNs was the closed window start when offset Commit was
	// first processed, unless a later Steps entry says otherwise.
	ClosedStartNs int64
}

// StepCheckpoint says that windows starting before ClosedStartNs closed
// when each partition had been processed up to Positions[i] (parallel to
// Checkpoint.Partitions; -1 = not seen yet).
type StepCheckpoint struct {
	ClosedStartNs int64
	Positions     []int64
}

// ErrCheckpoint is wrapped by errors about a checkpoint that cannot be
// restored.
var ErrCheckpoint = errors.New("window: bad checkpoint")

// Checkpoint returns the Windower's restart state. Take it after Drain, and
// persist it together with the offsets it carries (the same as Commits)
// once what Drain emitted is durably published.
func (w *Windower[A]) Checkpoint() Checkpoint {
	cp := Checkpoint{SizeNs: w.size, HopNs: w.hop, Started: w.started}
	if !w.started {
		return cp
	}
	cp.WatermarkNs, cp.ClosedStartNs, cp.EmittedStartNs = w.wm, w.closed*w.hop, w.emitted*w.hop
	var idx []int // partition numbers, in Partitions order
	for p := range w.parts {
		ps := &w.parts[p]
		if !ps.seen {
			continue
		}
		c := w.commitOf(p)
		base := ps.base
		for i := range w.steps {
			if w.steps[i].at(p) < c {
				base = max(base, w.steps[i].closed)
			}
		}
		cp.Partitions = append(cp.Partitions, PartitionCheckpoint{
			Partition: int32(p), Commit: c, Position: ps.position(), ClosedStartNs: base * w.hop,
		})
		idx = append(idx, p)
	}
	for i := range w.steps {
		s := &w.steps[i]
		needed := false
		for j, p := range idx {
			needed = needed || s.at(p) >= cp.Partitions[j].Commit
		}
		if !needed {
			continue
		}
		sc := StepCheckpoint{ClosedStartNs: s.closed * w.hop, Positions: make([]int64, len(idx))}
		for j, p := range idx {
			sc.Positions[j] = s.at(p)
		}
		cp.Steps = append(cp.Steps, sc)
	}
	return cp
}

// Validate checks a checkpoint's internal consistency.
func (cp *Checkpoint) Validate() error {
	if cp.SizeNs <= 0 || cp.HopNs <= 0 || cp.SizeNs%cp.HopNs != 0 {
		return fmt.Errorf("%w: size %d, hop %d", ErrCheckpoint, cp.SizeNs, cp.HopNs)
	}
	if !cp.Started {
		if len(cp.Partitions) > 0 || len(cp.Steps) > 0 {
			return fmt.Errorf("%w: partitions or steps before any event", ErrCheckpoint)
		}
		return nil
	}
	if err := cp.checkTimes(); err != nil {
		return err
	}
	if err := cp.checkPartitions(); err != nil {
		return err
	}
	return cp.checkSteps()
}

func (cp *Checkpoint) window(ns int64) bool {
	return ns%cp.HopNs == 0 && ns >= -MaxEventTimeNs && ns <= MaxEventTimeNs
}

func (cp *Checkpoint) checkTimes() error {
	switch {
	case cp.WatermarkNs < -MaxEventTimeNs || cp.WatermarkNs > MaxEventTimeNs:
		return fmt.Errorf("%w: watermark %d out of range", ErrCheckpoint, cp.WatermarkNs)
	case !cp.window(cp.ClosedStartNs) || !cp.window(cp.EmittedStartNs):
		return fmt.Errorf("%w: closed %d or emitted %d not a window start", ErrCheckpoint, cp.ClosedStartNs, cp.EmittedStartNs)
	case cp.EmittedStartNs > cp.ClosedStartNs:
		return fmt.Errorf("%w: emitted %d past closed %d", ErrCheckpoint, cp.EmittedStartNs, cp.ClosedStartNs)
	}
	return nil
}

func (cp *Checkpoint) checkPartitions() error {
	for i, p := range cp.Partitions {
		switch {
		case p.Partition < 0 || (i > 0 && p.Partition <= cp.Partitions[i-1].Partition):
			return fmt.Errorf("%w: partition %d out of order", ErrCheckpoint, p.Partition)
		case p.Commit < 0 || p.Position < -1 || p.Commit > p.Position+1:
			return fmt.Errorf("%w: partition %d commit %d, position %d", ErrCheckpoint, p.Partition, p.Commit, p.Position)
		case !cp.window(p.ClosedStartNs) || p.ClosedStartNs > cp.ClosedStartNs:
			return fmt.Errorf("%w: partition %d closed start %d", ErrCheckpoint, p.Partition, p.ClosedStartNs)
		}
	}
	return nil
}

func (cp *Checkpoint) checkSteps() error {
	for i, s := range cp.Steps {
		if len(s.Positions) != len(cp.Partitions) {
			return fmt.Errorf("%w: step %d has %d positions for %d partitions", ErrCheckpoint, i, len(s.Positions), len(cp.Partitions))
		}
		if !cp.window(s.ClosedStartNs) || s.ClosedStartNs > cp.ClosedStartNs ||
			(i > 0 && s.ClosedStartNs < cp.Steps[i-1].ClosedStartNs) {
			return fmt.Errorf("%w: step %d closed start %d", ErrCheckpoint, i, s.ClosedStartNs)
		}
		for j, v := range s.Positions {
			if v < -1 || v > cp.Partitions[j].Position || (i > 0 && v < cp.Steps[i-1].Positions[j]) {
				return fmt.Errorf("%w: step %d position %d of partition %d", ErrCheckpoint, i, v, cp.Partitions[j].Partition)
			}
		}
	}
	return nil
}

// Restore loads a checkpoint into a Windower that has seen no event yet.
// Re-delivered offsets from each partition's Commit through its Position
// are then replayed (package doc), and Drain waits until they have all
// arrived or EndReplay is called.
func (w *Windower[A]) Restore(cp Checkpoint) error {
	if w.started || len(w.parts) > 0 {
		return fmt.Errorf("%w: restore into a windower that has seen events", ErrCheckpoint)
	}
	if cp.SizeNs != w.size || cp.HopNs != w.hop {
		return fmt.Errorf("%w: windows of %dns every %dns, configured %dns every %dns",
			ErrCheckpoint, cp.SizeNs, cp.HopNs, w.size, w.hop)
	}
	if err := cp.Validate(); err != nil {
		return err
	}
	if !cp.Started {
		return nil
	}
	if n := len(cp.Partitions); n > 0 && cp.Partitions[n-1].Partition >= w.maxParts {
		return fmt.Errorf("%w: partition %d beyond the configured %d", ErrCheckpoint, cp.Partitions[n-1].Partition, w.maxParts)
	}
	w.started, w.wm = true, cp.WatermarkNs
	w.closed, w.emitted = cp.ClosedStartNs/w.hop, cp.EmittedStartNs/w.hop
	w.restorePartitions(cp.Partitions)
	for _, s := range cp.Steps {
		pos := make([]int64, len(w.parts))
		for i := range pos {
			pos[i] = -1
		}
		for j, v := range s.Positions {
			pos[cp.Partitions[j].Partition] = v
		}
		w.steps = append(w.steps, step{closed: s.ClosedStartNs / w.hop, pos: pos})
	}
	return nil
}

func (w *Windower[A]) restorePartitions(parts []PartitionCheckpoint) {
	if n := len(parts); n > 0 {
		w.parts = make([]partState, parts[n-1].Partition+1)
	}
	for _, p := range parts {
		ps := partState{seen: true, last: p.Commit - 1, replayTo: -1, restoredCommit: p.Commit, base: p.ClosedStartNs / w.hop}
		if p.Position >= p.Commit {
			ps.replayTo = p.Position
			w.replayPending++
		}
		w.parts[p.Partition] = ps
	}
}
