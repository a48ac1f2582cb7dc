package window

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const sec = int64(time.Second)

// acc is a test accumulator: how many events, and a sum of their ids (so
// that two windows with the same events compare equal, in any order).
type acc struct {
	n   int
	ids int64
}

// row is one emitted entry, flattened for comparison.
type row struct {
	Start, End int64 // seconds
	Key        string
	N          int
	IDs        int64
	Late       uint64
}

func (r row) String() string {
	return fmt.Sprintf("[%d,%d) %s n=%d ids=%d late=%d", r.Start, r.End, r.Key, r.N, r.IDs, r.Late)
}

func (r row) id() ID { return ID{r.Start, r.End, r.Key} }

type harness struct {
	t    *testing.T
	w    *Windower[acc]
	rows []row
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	w, err := New[acc](cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, w: w}
}

func (h *harness) emit(e Entry[acc]) {
	h.rows = append(h.rows, row{e.Window.StartNs / sec, e.Window.EndNs / sec, e.Key, e.Acc.n, e.Acc.ids, e.Late})
}

// add adds event id at time tSec (fractional seconds allowed) and drains.
func (h *harness) add(pos Position, tSec float64, key string, id int64) Outcome {
	out := h.w.Add(pos, int64(tSec*float64(sec)), key, func(a *acc) { a.n++; a.ids += id })
	h.w.Drain(h.emit)
	return out
}

func (h *harness) flush() { h.w.Flush(h.emit) }

func cfgTumbling(sizeSec, oooSec, lateSec int64) Config {
	c := DefaultConfig()
	c.Size, c.Hop = time.Duration(sizeSec*sec), time.Duration(sizeSec*sec)
	c.OutOfOrder, c.AllowedLateness = time.Duration(oooSec*sec), time.Duration(lateSec*sec)
	return c
}

func wantRows(t *testing.T, got, want []row) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n got %v\nwant %v", got, want)
	}
}

func TestTumblingOutOfOrderWithinLateness(t *testing.T) {
	// 10 s windows, watermark 2 s behind, 3 s lateness: window [0,10)
	// closes when the watermark reaches 13, i.e. after an event at 15.
	h := newHarness(t, cfgTumbling(10, 2, 3))
	seq := []struct {
		t    float64
		key  string
		id   int64
		want Outcome
	}{
		{1, "a", 1, Applied},
		{11, "a", 2, Applied},  // watermark 9
		{9.5, "b", 4, Applied}, // out of order, window [0,10) still open
		{14.9, "a", 8, Applied},
		{7, "a", 16, Applied},  // watermark 12.9 < 13: still open
		{15, "b", 32, Applied}, // watermark 13: [0,10) closes
		{8, "a", 64, Late},     // counted late, in the oldest open window [10,20)
	}
	for _, e := range seq {
		if got := h.add(Untracked, e.t, e.key, e.id); got != e.want {
			t.Errorf("event %d at %v: %v, want %v", e.id, e.t, got, e.want)
		}
	}
	wantRows(t, h.rows, []row{
		{0, 10, "a", 2, 17, 0},
		{0, 10, "b", 1, 4, 0},
	})
	h.flush()
	wantRows(t, h.rows[2:], []row{
		{10, 20, "a", 2, 10, 1},
		{10, 20, "b", 1, 32, 0},
	})
	if s := h.w.Stats(); s.Late != 1 || s.Applied != 6 || s.Windows != 2 || s.Entries != 4 {
		t.Errorf("stats %+v", s)
	}
}

func TestLateEventsAreCountedNotApplied(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 0, 0))
	h.add(Untracked, 5, "k", 1)
	h.add(Untracked, 25, "k", 2) // closes [0,10) and [10,20)
	for i, ts := range []float64{3, 12, 19.999} {
		if got := h.add(Untracked, ts, "k", 100); got != Late {
			t.Errorf("late event %d: %v, want late", i, got)
		}
	}
	h.add(Untracked, 21, "other", 4)
	h.flush()
	wantRows(t, h.rows, []row{
		{0, 10, "k", 1, 1, 0},
		{20, 30, "k", 1, 2, 3}, // the late ones: counted, ids not added
		{20, 30, "other", 1, 4, 0},
	})
}

func TestLateCountCreatesEntryForItsKey(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 0, 0))
	h.add(Untracked, 25, "a", 1)
	h.add(Untracked, 1, "b", 2) // b has no entry in [20,30) yet
	h.flush()
	wantRows(t, h.rows, []row{{20, 30, "a", 1, 1, 0}, {20, 30, "b", 0, 0, 1}})
}

func TestHoppingWindows(t *testing.T) {
	c := cfgTumbling(30, 0, 0)
	c.Hop = 10 * time.Second
	h := newHarness(t, c)
	h.add(Untracked, 25, "k", 1) // windows starting 0, 10, 20
	h.add(Untracked, 31, "k", 2) // 10, 20, 30; watermark 31 closes [0,30)
	h.add(Untracked, 5, "k", 4)  // [0,30) closed, [-10,20) and [-20,10) too: late
	h.add(Untracked, 19, "k", 8) // [0,30) closed: late once; applied to [10,40)
	h.flush()
	wantRows(t, h.rows, []row{
		{0, 30, "k", 1, 1, 0},
		{10, 40, "k", 3, 11, 2},
		{20, 50, "k", 2, 3, 0},
		{30, 60, "k", 1, 2, 0},
	})
	if s := h.w.Stats(); s.Late != 2 || s.Applied != 3 {
		t.Errorf("stats %+v: want 2 late, 3 applied", s)
	}
}

func TestEmissionOrderAndExactlyOnce(t *testing.T) {
	for _, hopSec := range []int64{10, 5, 2} {
		t.Run(fmt.Sprintf("hop%d", hopSec), func(t *testing.T) {
			c := cfgTumbling(10, 1, 2)
			c.Hop = time.Duration(hopSec * sec)
			h := newHarness(t, c)
			r := rand.New(rand.NewPCG(uint64(hopSec), 9))
			applied := 0
			for i := range 3000 {
				ts := float64(i)*0.1 + r.NormFloat64()*2 // some beyond ooo+lateness
				ts = max(ts, 0)
				if h.add(Untracked, ts, fmt.Sprintf("k%d", r.IntN(5)), 1) == Applied {
					applied++
				}
			}
			h.flush()
			seen := map[ID]bool{}
			n, late := 0, uint64(0)
			for i, r := range h.rows {
				if seen[r.id()] {
					t.Fatalf("%v emitted twice", r)
				}
				seen[r.id()] = true
				if i > 0 {
					p := h.rows[i-1]
					if r.End < p.End || (r.End == p.End && r.Key <= p.Key) {
						t.Fatalf("row %v after %v: not in (end, key) order", r, p)
					}
				}
				n += r.N
				late += r.Late
			}
			s := h.w.Stats()
			// Every applied event is in all its open windows; a partly late
			// one in fewer. So: n <= applied*span, and late counts add up.
			span := int(10 / hopSec)
			if late != s.Late || n > applied*span || n < applied {
				t.Errorf("n=%d late=%d, stats %+v (span %d)", n, late, s, span)
			}
			if s.Late == 0 {
				t.Errorf("the stream was meant to have late events")
			}
		})
	}
}

func TestWindowClosesExactlyAtWatermark(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 2, 3))
	h.add(Untracked, 5, "k", 1)
	h.w.AdvanceWatermark(13*sec - 1)
	if h.w.Ready() || h.w.Drain(h.emit) != 0 {
		t.Fatalf("window [0,10) emitted before watermark reached end+lateness")
	}
	h.w.AdvanceWatermark(13 * sec)
	if !h.w.Ready() {
		t.Fatalf("window [0,10) not ready at watermark = end+lateness")
	}
	h.w.Drain(h.emit)
	wantRows(t, h.rows, []row{{0, 10, "k", 1, 1, 0}})
	if wm, ok := h.w.Watermark(); !ok || wm != 13*sec {
		t.Errorf("Watermark() = %d, %v", wm, ok)
	}
	h.w.AdvanceWatermark(1) // never moves back
	if wm, _ := h.w.Watermark(); wm != 13*sec {
		t.Errorf("watermark moved back to %d", wm)
	}
}

func TestDuplicateOffsetsSkipped(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 0, 0))
	p0 := func(o int64) Position { return Position{Partition: 0, Offset: o} }
	p1 := func(o int64) Position { return Position{Partition: 1, Offset: o} }
	h.add(p0(0), 1, "k", 1)
	h.add(p0(1), 2, "k", 2)
	h.add(p1(0), 3, "k", 4)
	if got := h.add(p0(1), 2, "k", 2); got != Duplicate {
		t.Errorf("re-delivered offset: %v, want duplicate", got)
	}
	if got := h.add(p0(0), 1, "k", 1); got != Duplicate {
		t.Errorf("older offset: %v, want duplicate", got)
	}
	if got := h.add(p0(5), 4, "k", 8); got != Applied { // gaps are fine
		t.Errorf("offset after a gap: %v", got)
	}
	h.flush()
	wantRows(t, h.rows, []row{{0, 10, "k", 4, 15, 0}})
	if s := h.w.Stats(); s.Duplicates != 2 {
		t.Errorf("Duplicates = %d, want 2", s.Duplicates)
	}
}

func TestCommitsHoldOffsetsOfOpenWindows(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 5, 0))
	at := func(p int32, o int64) Position { return Position{Partition: p, Offset: o} }
	h.add(at(0, 10), 5, "k", 1)
	h.add(at(1, 20), 6, "k", 1)
	h.add(at(0, 11), 12, "k", 1)
	wantCommits(t, h.w, []Commit{{0, 10}, {1, 20}}) // [0,10) open
	h.add(at(0, 12), 26, "k", 1)                    // closes [0,10) and [10,20)
	wantCommits(t, h.w, []Commit{{0, 12}, {1, 21}}) // partition 1 has nothing open
	h.add(at(1, 21), 3, "k", 1)                     // late: counted in [20,30)
	wantCommits(t, h.w, []Commit{{0, 12}, {1, 21}})
	h.flush()
	wantCommits(t, h.w, []Commit{{0, 13}, {1, 22}})
}

func wantCommits(t *testing.T, w *Windower[acc], want []Commit) {
	t.Helper()
	if got := w.Commits(nil); !slices.Equal(got, want) {
		t.Errorf("Commits = %v, want %v", got, want)
	}
}

func TestInvalidEventsCounted(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 0, 0))
	for _, c := range []struct {
		pos Position
		t   float64
	}{
		{Position{Partition: -1, Offset: 0}, 1},
		{Position{Partition: 1 << 12, Offset: 0}, 1},
		{Untracked, -1},
		{Untracked, float64(MaxEventTimeNs)/float64(sec) + 10},
	} {
		if got := h.add(c.pos, c.t, "k", 1); got != Invalid {
			t.Errorf("%+v at %v: %v, want invalid", c.pos, c.t, got)
		}
	}
	if s := h.w.Stats(); s.Invalid != 4 || s.Events != 4 {
		t.Errorf("stats %+v", s)
	}
}

func TestSkippedOffsetsMoveCommits(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 0, 0))
	at := func(o int64) Position { return Position{Partition: 0, Offset: o} }
	h.add(at(0), 1, "k", 1)
	h.add(at(1), 15, "k", 2) // closes [0,10)
	wantCommits(t, h.w, []Commit{{0, 1}})
	if got := h.add(at(2), -5, "k", 4); got != Invalid {
		t.Fatalf("negative time: %v", got)
	}
	h.w.Skip(at(3)) // a record that failed decoding
	h.w.Flush(h.emit)
	wantCommits(t, h.w, []Commit{{0, 4}})
	h.w.Skip(at(3)) // already processed: no effect
	h.w.Skip(Position{Partition: 7, Offset: 9})
	wantCommits(t, h.w, []Commit{{0, 4}})
	if got := h.add(at(3), 21, "k", 8); got != Duplicate {
		t.Errorf("skipped offset re-delivered: %v, want duplicate", got)
	}
}

func TestMaxKeysOverflowCounted(t *testing.T) {
	c := cfgTumbling(10, 0, 0)
	c.MaxKeysPerWindow = 2
	h := newHarness(t, c)
	h.add(Untracked, 1, "a", 1)
	h.add(Untracked, 1, "b", 1)
	if got := h.add(Untracked, 1, "c", 1); got != Overflow {
		t.Errorf("third key: %v, want overflow", got)
	}
	h.add(Untracked, 11, "c", 1) // a new window has room
	h.flush()
	wantRows(t, h.rows, []row{{0, 10, "a", 1, 1, 0}, {0, 10, "b", 1, 1, 0}, {10, 20, "c", 1, 1, 0}})
	if s := h.w.Stats(); s.Overflow != 1 {
		t.Errorf("Overflow = %d, want 1", s.Overflow)
	}
}

func TestFlushClosesEverything(t *testing.T) {
	h := newHarness(t, cfgTumbling(10, 5, 5))
	h.add(Untracked, 1, "k", 1)
	h.add(Untracked, 12, "k", 2)
	if n := h.w.Flush(h.emit); n != 2 {
		t.Fatalf("Flush emitted %d windows, want 2", n)
	}
	if got := h.add(Untracked, 13, "k", 4); got != Late {
		t.Errorf("event for a flushed window: %v, want late", got)
	}
	if got := h.add(Untracked, 21, "k", 8); got != Applied {
		t.Errorf("event for a new window after Flush: %v", got)
	}
}

func TestMemoryBoundedByWindowsAndKeys(t *testing.T) {
	h := newHarness(t, cfgTumbling(1, 1, 1))
	for i := range 20_000 {
		h.add(Untracked, float64(i)*0.01, fmt.Sprintf("k%d", i%8), 1)
		if len(h.w.wins) > 4 {
			t.Fatalf("%d windows held at event %d", len(h.w.wins), i)
		}
	}
	if n := len(h.w.wins) + len(h.w.free); n > 5 {
		t.Errorf("%d window structs allocated for a stream needing at most 4 open", n)
	}
}

func TestConfigValidate(t *testing.T) {
	base := DefaultConfig()
	if err := base.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"zero size":      func(c *Config) { c.Size = 0 },
		"zero hop":       func(c *Config) { c.Hop = 0 },
		"not a multiple": func(c *Config) { c.Hop = 3 * time.Second },
		"too many":       func(c *Config) { c.Hop = c.Size / 100 },
		"negative ooo":   func(c *Config) { c.OutOfOrder = -1 },
		"negative late":  func(c *Config) { c.AllowedLateness = -1 },
		"huge size":      func(c *Config) { c.Size, c.Hop = 1<<62, 1<<62 },
		"no keys":        func(c *Config) { c.MaxKeysPerWindow = 0 },
		"no partitions":  func(c *Config) { c.MaxPartitions = 0 },
	} {
		c := base
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", name, err)
		}
		if _, err := New[acc](c, nil); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	if Applied.String() != "applied" || Invalid.String() != "invalid" || Outcome(99).String() != "outcome(99)" {
		t.Errorf("String: %v %v %v", Applied, Invalid, Outcome(99))
	}
}
