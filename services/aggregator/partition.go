package aggregator

import (
	"fmt"
	"time"

	"github.com/ilb-router/ilb/streams/window"
)

// partition is the window state of one owned partition of the signals
// topic. Each partition has its own windows and watermark, so what it
// emits depends only on the partition's records, in their order: not on
// which instance owns it, nor on how fetches of several partitions
// interleave (package doc).
type partition struct {
	p int32
	f *window.Features

	lastOffset  int64     // last offset seen, decoded or not; -1 none
	fetched     bool      // a record was read since the partition was assigned
	lastArrival time.Time // wall time of the last record
	maxEventNs  int64     // largest event time applied or offered

	// commit and meta are what the next commit carries; committed is what
	// the group last stored (-1: nothing known).
	commit    int64
	meta      string
	committed int64
	// published is the newest window end the group had published when
	// the partition was restored (readback): windows re-emitted up to it
	// are not published again.
	published int64
	stats     window.FeatureStats // at the last look (counters are deltas of it)
}

// newPartition returns the state of partition p, restored from the
// checkpoint in its commit metadata when there is a usable one. committed
// is the group's committed offset (-1: none). A checkpoint that cannot be
// used is reported in err; the partition then starts empty.
func newPartition(p int32, fc window.FeaturesConfig, committed int64, meta string, now time.Time) (*partition, error) {
	f, err := window.NewFeatures(fc)
	if err != nil {
		return nil, err
	}
	ps := &partition{p: p, f: f, lastOffset: committed - 1, lastArrival: now, commit: -1, committed: committed}
	if committed < 0 {
		ps.lastOffset = -1
		return ps, nil
	}
	cp, err := decodeCheckpoint(meta)
	if err == nil {
		err = checkOwnCheckpoint(cp, p, committed)
	}
	if err == nil {
		err = f.Restore(cp)
	}
	if err != nil {
		ps.f, _ = window.NewFeatures(fc) // a failed Restore may leave state behind
		return ps, err
	}
	if wm, ok := f.Watermark(); ok {
		ps.maxEventNs = wm + int64(fc.Window.OutOfOrder)
	}
	return ps, nil
}

// idle advances the watermark of a partition that has received nothing
// for idleAfter, as if events kept arriving at the wall clock's pace
// after the last one, and gives up waiting for a replay that has not
// arrived (its records are gone).
func (ps *partition) idle(now time.Time, idleAfter, ooo time.Duration) (endedReplay bool) {
	quiet := now.Sub(ps.lastArrival)
	if quiet < idleAfter {
		return false
	}
	if ps.f.Replaying() {
		ps.f.EndReplay()
		endedReplay = true
	}
	if _, started := ps.f.Watermark(); started {
		ps.f.AdvanceWatermark(ps.maxEventNs + int64(quiet) - int64(ooo))
	}
	return endedReplay
}

// commitPoint works out the offset the partition may commit after Drain
// and the checkpoint to store with it: the Windower's commit while a
// window not yet emitted holds an offset, else one past the last record
// seen (records that went to the DLQ or were counted late hold nothing).
func (ps *partition) commitPoint(maxBytes int) error {
	cp := ps.f.Checkpoint()
	commit := ps.lastOffset + 1
	if n := len(cp.Partitions); n == 1 {
		pc := &cp.Partitions[0]
		if held := pc.Commit <= pc.Position; held || pc.Position >= ps.lastOffset {
			commit = pc.Commit
		} else {
			pc.Commit, pc.Position, pc.ClosedStartNs = commit, ps.lastOffset, cp.ClosedStartNs
		}
	}
	if ps.lastOffset < 0 && len(cp.Partitions) == 0 {
		return nil // nothing seen
	}
	meta, err := encodeCheckpoint(cp)
	if err != nil {
		return err
	}
	if len(meta) > maxBytes {
		return fmt.Errorf("aggregator: partition %d: checkpoint of %d bytes exceeds %d; offsets not committed", ps.p, len(meta), maxBytes)
	}
	ps.commit, ps.meta = commit, meta
	return nil
}

// dirty reports whether the partition has a commit to make.
func (ps *partition) dirty() bool { return ps.commit >= 0 && ps.commit != ps.committed }
