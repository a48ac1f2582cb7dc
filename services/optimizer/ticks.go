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
// A window ending at T is complete when every engine that reported in one
// of the last expectTicks solved windows (at first: every engine of the
// fleet) has its engine row for T, or is known to have none:
//   - its signals partition (schemas.HeaderWindow of the records its rows
//     came in) has delivered a later window: the aggregator keys features
//     by partition, so a partition's windows arrive in order, and one
//     past T without the engine means the engine was silent in T; or
//   - when no record names its partition (an aggregator that does not
//     set the header), a row of a window ending two window lengths after
//     T arrived;
//
// and, when the records announce fitted profiles
// (schemas.HeaderProfilesAsOf), once every fit as of T minus a window
// length or earlier has arrived on the profiles topic; or else when wait
// (wall time) has passed since T's first row arrived.
// Only the wait depends on timing: it fires when every engine of a
// partition stops reporting (or a partition lags by more than wait), and
// a replay then sees the same rows unless a row was more than wait late
// live.
type ticks struct {
	wait      time.Duration
	pending   []schemas.Feature // rows of unsolved windows
	profiles  []pendingProfiles
	firstSeen map[int64]time.Time // window end -> arrival of its first row
	lastSeen  map[string]int      // engine -> tick count when it last reported
	partOf    map[string]int32    // engine -> signals partition its rows came from
	progress  map[int32]int64     // signals partition -> newest window end delivered
	solved    int                 // windows solved
	last      int64               // end of the last solved window; 0: none
	late      uint64              // rows that arrived after their window was solved
	// announced is the latest profiles as-of the features records named
	// (schemas.HeaderProfilesAsOf); received the latest as-of of the
	// profiles records that arrived. Profiles come in order on their topic.
	announced, received int64
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
	t := &ticks{wait: wait, firstSeen: map[int64]time.Time{}, lastSeen: map[string]int{},
		partOf: map[string]int32{}, progress: map[int32]int64{}}
	for _, e := range fleet.Engines {
		t.lastSeen[e.Name] = 0
	}
	return t
}

// addFeatures queues rows of windows not solved yet and returns the rest
// (late rows: the caller applies them at once, for the next solve). src
// is the signals partition the rows came from, -1 if unknown.
func (t *ticks) addFeatures(rows []schemas.Feature, src int32, now time.Time) (late []schemas.Feature) {
	for _, r := range rows {
		if src >= 0 {
			t.progress[src] = max(t.progress[src], r.WindowEndUnixNano)
			if r.Cluster == "" {
				t.partOf[r.Engine] = src
			}
		}
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
	t.received = max(t.received, asOf)
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
	twoLater := false
	for _, r := range t.pending {
		twoLater = twoLater || r.WindowEndUnixNano >= end+2*length
		if r.WindowEndUnixNano == end && r.Cluster == "" {
			seen[r.Engine] = true
		}
	}
	for e, n := range t.lastSeen {
		if t.solved-n >= expectTicks || seen[e] {
			continue
		}
		if p, ok := t.partOf[e]; ok {
			if t.progress[p] <= end {
				return 0, false // its partition may still bring it
			}
		} else if !twoLater || len(t.progress) > 0 {
			// Records name their partitions but none has brought e
			// yet: it may be in one not heard from (a burst from one
			// partition arrives first), so only the wait settles it.
			return 0, false
		}
	}
	// Every fit as of end − length or before must be in: the latest one
	// the records announced, or (if that is later) any record past it,
	// since the profiles topic is in order.
	if need := min(t.announced, end-length+1); t.received < need {
		return 0, false
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
