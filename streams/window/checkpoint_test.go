package window

import (
	"errors"
	"reflect"
	"testing"
)

func sampleCheckpoint(t testing.TB, crash int) Checkpoint {
	cfg := restartConfigs()["hopping"]
	w, err := New[acc](cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range genStream(31, 800, 4, 500) {
		if i == crash {
			break
		}
		w.Add(e.pos, int64(e.t*float64(sec)), e.key, func(a *acc) { a.n++ })
		w.Drain(func(Entry[acc]) {})
	}
	return w.Checkpoint()
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, crash := range []int{0, 1, 100, 799} {
		cp := sampleCheckpoint(t, crash)
		b, err := cp.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Checkpoint
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("crash %d: %v", crash, err)
		}
		if !reflect.DeepEqual(got, cp) {
			t.Errorf("crash %d: round trip changed the checkpoint:\n got %+v\nwant %+v", crash, got, cp)
		}
	}
}

func TestCheckpointStaysSmall(t *testing.T) {
	cp := sampleCheckpoint(t, 799)
	b, err := cp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// 800 events over 40 s of event time: the steps a replay can reach span
	// the open windows (10 s + 3 s of lateness), not the whole stream.
	if len(cp.Steps) > 6 || len(b) > 300 {
		t.Errorf("%d steps, %d bytes: the checkpoint grows with the stream", len(cp.Steps), len(b))
	}
	t.Logf("checkpoint: %d partitions, %d steps, %d bytes", len(cp.Partitions), len(cp.Steps), len(b))
}

func TestCheckpointValidateRejects(t *testing.T) {
	good := sampleCheckpoint(t, 400)
	if len(good.Steps) == 0 || len(good.Partitions) < 2 {
		t.Fatalf("sample checkpoint too small to corrupt: %+v", good)
	}
	for name, corrupt := range map[string]func(*Checkpoint){
		"hop not dividing size":  func(c *Checkpoint) { c.HopNs = 3 * sec },
		"emitted past closed":    func(c *Checkpoint) { c.EmittedStartNs = c.ClosedStartNs + c.HopNs },
		"closed not a start":     func(c *Checkpoint) { c.ClosedStartNs++ },
		"watermark out of range": func(c *Checkpoint) { c.WatermarkNs = MaxEventTimeNs + 1 },
		"partitions out of order": func(c *Checkpoint) {
			c.Partitions[0], c.Partitions[1] = c.Partitions[1], c.Partitions[0]
		},
		"commit past position": func(c *Checkpoint) { c.Partitions[0].Commit = c.Partitions[0].Position + 2 },
		"negative commit":      func(c *Checkpoint) { c.Partitions[0].Commit = -1 },
		"step positions short": func(c *Checkpoint) { c.Steps[0].Positions = c.Steps[0].Positions[:1] },
		"step beyond position": func(c *Checkpoint) { c.Steps[0].Positions[0] = c.Partitions[0].Position + 1 },
		"steps out of order": func(c *Checkpoint) {
			c.Steps = append(c.Steps, StepCheckpoint{ClosedStartNs: c.Steps[0].ClosedStartNs - c.HopNs, Positions: c.Steps[0].Positions})
		},
		"unstarted with state": func(c *Checkpoint) { c.Started = false },
	} {
		c := cloneCheckpoint(good)
		corrupt(&c)
		if err := c.Validate(); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: Validate = %v, want ErrCheckpoint", name, err)
		}
		w, _ := New[acc](restartConfigs()["hopping"], nil)
		if err := w.Restore(c); err == nil {
			t.Errorf("%s: Restore accepted it", name)
		}
	}
}

func cloneCheckpoint(c Checkpoint) Checkpoint {
	b, _ := c.MarshalBinary()
	var out Checkpoint
	_ = out.UnmarshalBinary(b)
	return out
}

func TestRestoreRejectsMismatch(t *testing.T) {
	cp := sampleCheckpoint(t, 300)
	tumbling, _ := New[acc](restartConfigs()["tumbling"], nil)
	if err := tumbling.Restore(cp); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("restore into other windows: %v", err)
	}
	used, _ := New[acc](restartConfigs()["hopping"], nil)
	used.Add(Untracked, 5*sec, "k", func(*acc) {})
	if err := used.Restore(cp); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("restore into a used windower: %v", err)
	}
	small := restartConfigs()["hopping"]
	small.MaxPartitions = 2
	few, _ := New[acc](small, nil)
	if err := few.Restore(cp); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("restore of partition 3 with MaxPartitions 2: %v", err)
	}
	fresh, _ := New[acc](restartConfigs()["hopping"], nil)
	if err := fresh.Restore(Checkpoint{SizeNs: 10 * sec, HopNs: 5 * sec}); err != nil {
		t.Errorf("restore of an empty checkpoint: %v", err)
	}
}

func TestUnmarshalRejectsGarbage(t *testing.T) {
	good, _ := sampleCheckpoint(t, 300).MarshalBinary()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte{'X'}, good[1:]...),
		"version":   append([]byte{'W', 9}, good[2:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
		"huge count": {'W', 1, 20, 10, 1, 0, 0, 0,
			0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		var c Checkpoint
		if err := c.UnmarshalBinary(b); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: %v, want ErrCheckpoint", name, err)
		}
	}
}

// FuzzCheckpoint: decoding never panics; what decodes re-encodes to the
// same bytes, restores or is refused, and a restored Windower takes events.
func FuzzCheckpoint(f *testing.F) {
	for _, crash := range []int{0, 1, 50, 300, 799} {
		b, _ := sampleCheckpoint(f, crash).MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Checkpoint
		if err := c.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var c2 Checkpoint
		if err := c2.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-decode: %v", err)
		}
		cfg := restartConfigs()["hopping"]
		w, _ := New[acc](cfg, nil)
		if err := w.Restore(c); err != nil {
			return
		}
		for i, p := range c.Partitions {
			w.Add(Position{Partition: p.Partition, Offset: p.Commit}, int64(i)*sec, "k", func(a *acc) { a.n++ })
		}
		w.Commits(nil)
		w.Checkpoint()
		w.Flush(func(Entry[acc]) {})
	})
}
