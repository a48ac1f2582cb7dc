package aggregator

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/window"
)

// TestCommitPoint covers the commit offset and checkpoint a partition
// stores: held back by an open window, past records that went to the DLQ
// when none is open, and restorable.
func TestCommitPoint(t *testing.T) {
	fc := testConfig([]string{"127.0.0.1:1"}, "g").windowConfig()
	now := time.Unix(0, base)
	ps, err := newPartition(4, fc, -1, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.commitPoint(4000); err != nil || ps.dirty() {
		t.Fatalf("nothing seen: commit %d dirty %v err %v", ps.commit, ps.dirty(), err)
	}
	add := func(off int64, sec float64) {
		ev := completion("e", "", at(sec), 10, 1)
		ps.lastOffset = off
		ps.f.Add(window.Position{Partition: 4, Offset: off}, &ev)
	}
	add(0, 0.1)
	add(1, 0.2)
	ps.lastOffset = 2 // a DLQ record
	if err := ps.commitPoint(4000); err != nil || ps.commit != 0 {
		t.Fatalf("open window holds offset 0: commit %d, %v", ps.commit, err)
	}
	add(3, 1.5) // closes [0,1s)
	ps.f.Drain(nil)
	if err := ps.commitPoint(4000); err != nil || ps.commit != 3 {
		t.Fatalf("after the window closed: commit %d, %v", ps.commit, err)
	}
	// A restart restores from the commit: offset 3 is replayed, offsets
	// before it are duplicates.
	re, err := newPartition(4, fc, ps.commit, ps.meta, now)
	if err != nil {
		t.Fatal(err)
	}
	ev := completion("e", "", at(0.3), 10, 1)
	if out := re.f.Add(window.Position{Partition: 4, Offset: 2}, &ev); out != window.Duplicate {
		t.Errorf("offset 2 after restore: %v, want duplicate", out)
	}
	// Stale or foreign checkpoints are refused, and the partition starts
	// empty.
	for name, c := range map[string]struct {
		p      int32
		commit int64
		meta   string
	}{
		"offset reset":    {4, 0, ps.meta},
		"other partition": {5, 3, ps.meta},
		"damaged":         {4, 3, ps.meta[:len(ps.meta)-3]},
	} {
		got, err := newPartition(c.p, fc, c.commit, c.meta, now)
		if err == nil || errors.Is(err, errNoCheckpoint) || got == nil {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if _, err := newPartition(4, fc, 3, "member-1", now); !errors.Is(err, errNoCheckpoint) {
		t.Errorf("foreign metadata: %v", err)
	}
	if err := ps.commitPoint(10); err == nil {
		t.Error("checkpoint beyond the metadata limit accepted")
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	fc := testConfig([]string{"127.0.0.1:1"}, "g").windowConfig()
	ps, _ := newPartition(0, fc, -1, "", time.Unix(0, base))
	for i := range 5 {
		ev := schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{Engine: "e", TimeUnixNano: at(float64(i) * 0.7)}}
		ps.lastOffset = int64(i)
		ps.f.Add(window.Position{Offset: int64(i)}, &ev)
	}
	ps.f.Drain(nil)
	if err := ps.commitPoint(4000); err != nil {
		f.Fatal(err)
	}
	f.Add(ps.meta)
	f.Add(checkpointPrefix)
	f.Add(checkpointPrefix + "V0ECAgA")
	f.Add("member-id")
	f.Fuzz(func(t *testing.T, meta string) {
		cp, err := decodeCheckpoint(meta)
		if err != nil {
			return
		}
		again, err := encodeCheckpoint(cp)
		if err != nil {
			t.Fatalf("decoded checkpoint does not encode: %v", err)
		}
		cp2, err := decodeCheckpoint(again)
		if err != nil || !reflect.DeepEqual(cp, cp2) {
			t.Fatalf("round trip: %+v vs %+v (%v)", cp, cp2, err)
		}
		commit := int64(0)
		if len(cp.Partitions) > 0 {
			commit = cp.Partitions[0].Commit
		}
		_, _ = newPartition(0, fc, commit, meta, time.Unix(0, base)) // must not panic
	})
}
