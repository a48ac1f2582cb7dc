package optimizer

import (
	"maps"
	"slices"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// ticks is the event clock (Config.Clock = ClockEvent): it holds the
// feature rows and profiles that arrived for windows not solved yet, and
// says when the oldest such window is complete. A window is solved on
// exactly its own rows and older ones, and on the profiles fitted at
// least one window before its end, so what a solve sees depends on the
// signal stream, not on when records happened to arrive. Owned by the
// solve loop.
//
// A window ending at T is complete when
//   - every engine that reported in one of the last expectTicks solved
//     windows (at first: every engine of the fleet) has its engine row
//     for T, or
//   - a row of a window ending at T + 2 window lengths or later arrived
//     (the missing engines went silent), or
//   - wait (wall time) passed since T's first row arrived.
//
// The last two are the only ways timing can change what a solve sees:
// they fire when engines stop reporting, and a replay then sees the same
// rows unless an engine's row was more than wait late live.
type ticks struct {
	wait      time.Duration
	pending   []schemas.Feature // rows of unsolved windows
	profiles  []pendingProfiles
	firstSeen map[int64]time.Time // window end -> arrival of its first row
	lastSeen  map[string]int      // engine -> tick count when it last reported
	solved    int                 // windows solved
	last      int64               // end of the last solved window; 0: none
	late      uint64              // rows that arrived after their window was solved
}

// expectTicks is how many solved windows an engine stays awaited after its
// last report: a silent engine delays that many windows (each by the
// complete-anyway rules), a late starter is awaited from its first report.
const expectTicks = 3

// pendingProfiles is one profiles record not applied yet; asOf is the
// event time of the windows its fit saw.
type pendingProfiles struct {
	asOf int64
	rows []schemas.Profile
}

func newTicks(fleet *schemas.Fleet, wait time.Duration) *ticks {
	t := &ticks{wait: wait, firstSeen: map[int64]time.Time{}, lastSeen: map[string]int{}}
	for _, e := range fleet.Engines {
		t.lastSeen[e.Name] = 0
	}
	return t
}

// addFeatures queues rows of windows not solved yet and returns the rest
// (late rows: the caller applies them at once, for the next solve).
func (t *ticks) addFeatures(rows []schemas.Feature, now time.Time) (late []schemas.Feature) {
	for _, r := range rows {
		if r.WindowEndUnixNano <= t.last {
			late = append(late, r)
			t.late++
			continue
		}
		if _, ok := t.firstSeen[r.WindowEndUnixNano]; !ok {
			t.firstSeen[r.WindowEndUnixNano] = now
		}
		t.pending = append(t.pending, r)
	}
	return late
}

func (t *ticks) addProfiles(asOf int64, rows []schemas.Profile) {
	if len(rows) > 0 {
		t.profiles = append(t.profiles, pendingProfiles{asOf: asOf, rows: rows})
	}
}

// oldest returns the end and length of the oldest pending window.
func (t *ticks) oldest() (end, length int64, ok bool) {
	for _, r := range t.pending {
		if !ok || r.WindowEndUnixNano < end {
			end, length, ok = r.WindowEndUnixNano, r.WindowEndUnixNano-r.WindowStartUnixNano, true
		}
	}
	return end, length, ok
}

// ready returns the end of the oldest pending window if it is complete.
func (t *ticks) ready(now time.Time) (int64, bool) {
	end, length, ok := t.oldest()
	if !ok {
		return 0, false
	}
	if !now.Before(t.firstSeen[end].Add(t.wait)) {
		return end, true
	}
	seen := map[string]bool{}
	for _, r := range t.pending {
		if r.WindowEndUnixNano >= end+2*length {
			return end, true
		}
		if r.WindowEndUnixNano == end && r.Cluster == "" {
			seen[r.Engine] = true
		}
	}
	for e, n := range t.lastSeen {
		if t.solved-n < expectTicks && !seen[e] {
			return 0, false
		}
	}
	return end, true
}

// deadline is when the oldest pending window is complete at the latest;
// zero when nothing is pending.
func (t *ticks) deadline() time.Time {
	end, _, ok := t.oldest()
	if !ok {
		return time.Time{}
	}
	return t.firstSeen[end].Add(t.wait)
}

// take removes and returns the rows of the windows ending at or before
// end, and the profiles fitted at least one window length before end, and
// notes which engines reported at end.
func (t *ticks) take(end int64) ([]schemas.Feature, []schemas.Profile) {
	var rows []schemas.Feature
	keep := t.pending[:0]
	length := int64(0)
	t.solved++
	for _, r := range t.pending {
		if r.WindowEndUnixNano > end {
			keep = append(keep, r)
			continue
		}
		rows = append(rows, r)
		if r.WindowEndUnixNano == end {
			length = max(length, r.WindowEndUnixNano-r.WindowStartUnixNano)
			if _, ok := t.lastSeen[r.Engine]; ok && r.Cluster == "" {
				t.lastSeen[r.Engine] = t.solved
			}
		}
	}
	clear(t.pending[len(keep):])
	t.pending = keep
	var profs []schemas.Profile
	pkeep := t.profiles[:0]
	for _, p := range t.profiles {
		if p.asOf <= end-length {
			profs = append(profs, p.rows...)
		} else {
			pkeep = append(pkeep, p)
		}
	}
	clear(t.profiles[len(pkeep):])
	t.profiles = pkeep
	for _, k := range slices.Collect(maps.Keys(t.firstSeen)) {
		if k <= end {
			delete(t.firstSeen, k)
		}
	}
	t.last = end
	return rows, profs
}
