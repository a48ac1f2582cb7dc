package window

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// event is one record of a simulated Kafka topic.
type event struct {
	pos Position
	t   float64 // seconds
	key string
	id  int64
}

// genStream makes a stream over parts partitions: event time advances
// 50 ms per event with jitter; about 1 in 12 events is delayed by 3-20 s,
// so that many are late; offsets start at 100*partition and skip a few
// values (as compacted or transactional topics do). Partition 0 falls
// silent after quietAfter events (an engine that stopped publishing), so
// that after a restart its re-read stretch can come after many new events
// of the others.
func genStream(seed uint64, n, parts, quietAfter int) []event {
	r := rand.New(rand.NewPCG(seed, 77))
	next := make([]int64, parts)
	for p := range next {
		next[p] = int64(100 * p)
	}
	evs := make([]event, n)
	for i := range evs {
		p := r.IntN(parts)
		if i >= quietAfter && p == 0 {
			p = 1 + r.IntN(parts-1)
		}
		ts := float64(i)*0.05 + r.Float64()*0.8
		if r.IntN(12) == 0 {
			ts -= 3 + 17*r.Float64()
		}
		evs[i] = event{
			pos: Position{Partition: int32(p), Offset: next[p]},
			t:   max(ts, 0),
			key: fmt.Sprintf("e%d", p*3+r.IntN(3)), // keyed by engine, as ilb.signals is
			id:  int64(i + 1),
		}
		next[p] += 1 + int64(r.IntN(4)/3)
	}
	return evs
}

// run feeds deliveries to a Windower restored from cp (nil: a fresh one),
// draining after each, and stops after crashAt deliveries (-1: never; then
// it flushes). It returns the rows and the checkpoint taken at the crash.
func run(t *testing.T, cfg Config, cp *Checkpoint, deliveries []event, crashAt int) ([]row, Checkpoint) {
	t.Helper()
	h := newHarness(t, cfg)
	if cp != nil {
		if err := h.w.Restore(roundTrip(t, *cp)); err != nil {
			t.Fatalf("restore: %v", err)
		}
	}
	for i, e := range deliveries {
		if i == crashAt {
			return h.rows, h.w.Checkpoint()
		}
		h.add(e.pos, e.t, e.key, e.id)
	}
	if crashAt >= 0 {
		return h.rows, h.w.Checkpoint()
	}
	h.flush()
	return h.rows, Checkpoint{}
}

// roundTrip stores and reloads a checkpoint, as a service would.
func roundTrip(t *testing.T, cp Checkpoint) Checkpoint {
	t.Helper()
	b, err := cp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Checkpoint
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatalf("reload checkpoint: %v", err)
	}
	return out
}

// order is how a restarted consumer interleaves its partitions.
type order int

const (
	inOrder  order = iota // the original order
	shuffled              // random, keeping each partition's offsets in order
	delayOne              // one partition's re-read stretch as late as possible
)

// redeliver is what a consumer reads after restarting from cp: every event
// at or after its partition's committed offset (all of a partition with no
// commit). Any order keeps each partition's offsets in order and the new
// (never processed) events in their original relative order, so that the
// watermark they drive is the same; the re-read stretches may mix freely.
func redeliver(evs []event, cp Checkpoint, how order, r *rand.Rand) []event {
	resume := map[int32]int64{}
	replayTo := map[int32]int64{}
	for _, p := range cp.Partitions {
		resume[p.Partition], replayTo[p.Partition] = p.Commit, p.Position
	}
	var out, fresh []event
	replays := map[int32][]event{}
	for _, e := range evs {
		if e.pos.Offset < resume[e.pos.Partition] {
			continue
		}
		out = append(out, e)
		if to, ok := replayTo[e.pos.Partition]; ok && e.pos.Offset <= to {
			replays[e.pos.Partition] = append(replays[e.pos.Partition], e)
		} else {
			fresh = append(fresh, e)
		}
	}
	switch how {
	case shuffled:
		return mix(fresh, replays, func(ready []int32) (int32, bool) {
			i := r.IntN(len(ready) + 1)
			return ready[min(i, len(ready)-1)], i == len(ready)
		})
	case delayOne:
		last := int32(-1)
		for p, rs := range replays {
			if last < 0 || len(rs) > len(replays[last]) || (len(rs) == len(replays[last]) && p < last) {
				last = p
			}
		}
		return mix(fresh, replays, func(ready []int32) (int32, bool) {
			for _, p := range ready {
				if p != last {
					return p, false
				}
			}
			return last, true
		})
	}
	return out
}

// mix merges fresh events and per-partition replays; pick chooses among
// the partitions with replays left, or says to take a fresh event (which
// is only possible once its partition's replays are done).
func mix(fresh []event, replays map[int32][]event, pick func(ready []int32) (int32, bool)) []event {
	var out []event
	for len(fresh) > 0 || len(replays) > 0 {
		var ready []int32
		for p := range replays {
			ready = append(ready, p)
		}
		slices.Sort(ready)
		canFresh := len(fresh) > 0 && len(replays[fresh[0].pos.Partition]) == 0
		var p int32
		takeFresh := len(ready) == 0
		if !takeFresh {
			p, takeFresh = pick(ready)
			takeFresh = takeFresh && canFresh
		}
		if takeFresh {
			out, fresh = append(out, fresh[0]), fresh[1:]
			continue
		}
		out, replays[p] = append(out, replays[p][0]), replays[p][1:]
		if len(replays[p]) == 0 {
			delete(replays, p)
		}
	}
	return out
}

// withDuplicates re-sends about 1 in 10 deliveries a few records later,
// as an at-least-once consumer does after a rebalance.
func withDuplicates(evs []event, r *rand.Rand) []event {
	var out []event
	for i, e := range evs {
		out = append(out, e)
		if r.IntN(10) == 0 && i >= 3 {
			out = append(out, evs[i-r.IntN(4)])
		}
	}
	return out
}

func restartConfigs() map[string]Config {
	tumbling := cfgTumbling(10, 1, 2)
	hopping := cfgTumbling(10, 1, 2)
	hopping.Hop = 5 * time.Second
	// Short windows: many closes per stream, so old steps get pruned.
	short := cfgTumbling(2, 1, 1)
	short.Hop = time.Second
	return map[string]Config{"tumbling": tumbling, "hopping": hopping, "short": short}
}

func TestRestartMatchesNoCrashRun(t *testing.T) {
	for name, cfg := range restartConfigs() {
		t.Run(name, func(t *testing.T) {
			evs := genStream(11, 600, 3, 330)
			ref, _ := run(t, cfg, nil, evs, -1)
			checkHasLate(t, ref)
			r := rand.New(rand.NewPCG(5, 5))
			for crash := 1; crash < len(evs); crash += 13 {
				for _, how := range []order{inOrder, shuffled, delayOne} {
					before, cp := run(t, cfg, nil, evs, crash)
					after, _ := run(t, cfg, &cp, withDuplicates(redeliver(evs, cp, how, r), r), -1)
					got := append(slices.Clip(before), after...)
					if !slices.Equal(got, ref) {
						t.Fatalf("crash after %d events (order %d): rows differ from the no-crash run\n%s",
							crash, how, diffRows(got, ref))
					}
				}
			}
		})
	}
}

// TestRestartFromOlderCheckpoint: the service stored its last checkpoint
// some events before it crashed, so windows emitted in between come out
// again. They must be identical to the first emission, and nothing else
// may change.
func TestRestartFromOlderCheckpoint(t *testing.T) {
	for name, cfg := range restartConfigs() {
		t.Run(name, func(t *testing.T) {
			evs := genStream(12, 600, 4, 600)
			ref, _ := run(t, cfg, nil, evs, -1)
			redone := 0
			for crash := 40; crash < len(evs); crash += 23 {
				_, cp := run(t, cfg, nil, evs, crash-37)  // last stored checkpoint
				before, _ := run(t, cfg, nil, evs, crash) // what went out before the crash
				after, _ := run(t, cfg, &cp, redeliver(evs, cp, inOrder, nil), -1)
				first := map[ID]row{}
				var got []row
				for _, r := range append(slices.Clip(before), after...) {
					if prev, ok := first[r.id()]; ok {
						if prev != r {
							t.Fatalf("crash at %d: %v emitted again as %v", crash, prev, r)
						}
						redone++
						continue
					}
					first[r.id()] = r
					got = append(got, r)
				}
				if !slices.Equal(got, ref) {
					t.Fatalf("crash at %d: deduplicated rows differ\n%s", crash, diffRows(got, ref))
				}
			}
			if redone == 0 {
				t.Errorf("no window was emitted twice: the test did not exercise the overlap")
			}
		})
	}
}

// TestRestartTwiceDuringReplay crashes again while the first replay is
// still in progress.
func TestRestartTwiceDuringReplay(t *testing.T) {
	for name, cfg := range restartConfigs() {
		t.Run(name, func(t *testing.T) {
			evs := genStream(13, 500, 3, 300)
			ref, _ := run(t, cfg, nil, evs, -1)
			r := rand.New(rand.NewPCG(6, 6))
			for crash := 60; crash < len(evs); crash += 41 {
				rows1, cp1 := run(t, cfg, nil, evs, crash)
				second := redeliver(evs, cp1, delayOne, r)
				for crash2 := 1; crash2 < len(second); crash2 += 37 {
					rows2, cp2 := run(t, cfg, &cp1, second, crash2)
					rows3, _ := run(t, cfg, &cp2, redeliver(evs, cp2, shuffled, r), -1)
					got := slices.Concat(rows1, rows2, rows3)
					if !slices.Equal(got, ref) {
						t.Fatalf("crashes at %d then %d: rows differ\n%s", crash, crash2, diffRows(got, ref))
					}
				}
			}
		})
	}
}

// TestReplayOfEventLateDuringReplay: while partition 0's replay is
// pending, new events of partition 1 close window [0,10) (not emitted yet)
// and a later one is late for it; a crash then, and a second restart, must
// not apply that late event to [0,10), although [0,10) is not emitted.
func TestReplayOfEventLateDuringReplay(t *testing.T) {
	cfg := cfgTumbling(10, 0, 0)
	all := []event{
		{Position{0, 0}, 5, "a", 1},
		{Position{1, 0}, 6, "b", 2},
		{Position{1, 1}, 25, "b", 4},
		{Position{1, 2}, 7, "b", 8},
	}
	ref, _ := run(t, cfg, nil, all, -1)
	wantRows(t, ref, []row{{0, 10, "a", 1, 1, 0}, {0, 10, "b", 1, 2, 0}, {20, 30, "b", 1, 4, 1}})
	rows1, cp1 := run(t, cfg, nil, all[:2], 2)
	second := []event{all[1], all[2], all[3], all[0]} // partition 0's replay last
	rows2, cp2 := run(t, cfg, &cp1, second, 3)
	if cp2.EmittedStartNs >= cp2.ClosedStartNs {
		t.Fatalf("checkpoint has emitted %d, closed %d: the case needs closed windows not yet emitted",
			cp2.EmittedStartNs, cp2.ClosedStartNs)
	}
	rows3, _ := run(t, cfg, &cp2, redeliver(all, cp2, inOrder, nil), -1)
	wantRows(t, slices.Concat(rows1, rows2, rows3), ref)
}

func TestReplayWaitsForEveryPartition(t *testing.T) {
	cfg := cfgTumbling(10, 0, 0)
	evs := []event{
		{Position{0, 0}, 1, "a", 1},
		{Position{1, 0}, 2, "b", 2},
		{Position{0, 1}, 3, "a", 4},
	}
	_, cp := run(t, cfg, nil, evs, 3)
	h := newHarness(t, cfg)
	if err := h.w.Restore(cp); err != nil {
		t.Fatal(err)
	}
	if !h.w.Replaying() {
		t.Fatal("not replaying after restoring a checkpoint with open windows")
	}
	h.add(Position{0, 0}, 1, "a", 1)
	h.add(Position{0, 1}, 3, "a", 4)
	h.add(Position{0, 2}, 25, "a", 8) // would close [0,10)
	if len(h.rows) != 0 {
		t.Fatalf("emitted %v before partition 1 was replayed", h.rows)
	}
	wantCommits(t, h.w, []Commit{{0, 0}, {1, 0}})
	h.add(Position{1, 0}, 2, "b", 2)
	wantRows(t, h.rows, []row{{0, 10, "a", 2, 5, 0}, {0, 10, "b", 1, 2, 0}})
	wantCommits(t, h.w, []Commit{{0, 2}, {1, 1}})
}

func TestEndReplayGivesUp(t *testing.T) {
	cfg := cfgTumbling(10, 0, 0)
	evs := []event{{Position{0, 0}, 1, "a", 1}, {Position{1, 0}, 2, "b", 2}}
	_, cp := run(t, cfg, nil, evs, 2)
	h := newHarness(t, cfg)
	if err := h.w.Restore(cp); err != nil {
		t.Fatal(err)
	}
	h.add(Position{0, 0}, 1, "a", 1)
	h.add(Position{0, 1}, 25, "a", 8)
	h.w.EndReplay() // partition 1 was revoked
	h.w.Drain(h.emit)
	wantRows(t, h.rows, []row{{0, 10, "a", 1, 1, 0}})
	if got := h.add(Position{1, 0}, 2, "b", 2); got != Duplicate {
		t.Errorf("offset given up on: %v, want duplicate", got)
	}
}

func checkHasLate(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		if r.Late > 0 {
			return
		}
	}
	t.Fatal("the reference run has no late events: the stream does not exercise lateness")
}

func diffRows(got, want []row) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i].String()
		}
		if i < len(want) {
			w = want[i].String()
		}
		if g != w {
			return fmt.Sprintf("first difference at row %d of %d/%d:\n got %s\nwant %s", i, len(got), len(want), g, w)
		}
	}
	return "equal"
}
