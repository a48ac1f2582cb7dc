package window

import "fmt"

// Position is where an event sits in its source: a Kafka partition and
// offset. A negative Offset means the event is untracked: no duplicate
// detection and no commit bookkeeping (for sources without offsets, such as
// the backtester).
type Position struct {
	Partition int32
	Offset    int64
}

// Untracked is the Position of an event without a source offset.
var Untracked = Position{Offset: -1}

// Outcome says what Add did with one event.
type Outcome uint8

// Outcomes of Add.
const (
	// Applied: the event updated at least one window. It may also have been
	// late for an older window of its own (hopping windows); that is counted
	// as late too.
	Applied Outcome = iota + 1
	// Late: every window of the event had closed. Not applied; counted.
	Late
	// Duplicate: the offset was already processed. Skipped.
	Duplicate
	// Replayed: re-delivered after Restore, and all it contributed had
	// already been emitted. Skipped.
	Replayed
	// Overflow: no window could take the event's key (MaxKeysPerWindow).
	Overflow
	// Invalid: the partition is outside 0..MaxPartitions-1, or the event
	// time outside 0..MaxEventTimeNs.
	Invalid
)

var outcomeNames = [...]string{"", "applied", "late", "duplicate", "replayed", "overflow", "invalid"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// MaxEventTimeNs bounds event times (about the year 2116), so that window
// arithmetic cannot overflow.
const MaxEventTimeNs = int64(1) << 62

// Stats are counters since the Windower was created.
type Stats struct {
	Events     uint64 // calls to Add
	Applied    uint64 // events applied to at least one window
	Late       uint64 // events late for at least one of their windows (not replays)
	Duplicates uint64 // offsets already processed
	Replayed   uint64 // events re-delivered after Restore (re-applied or not)
	Overflow   uint64 // window updates refused by MaxKeysPerWindow
	Invalid    uint64 // bad partition or event time
	Windows    uint64 // windows emitted
	Entries    uint64 // (window, key) entries emitted
}

// Bounds is a window's event-time range [StartNs, EndNs).
type Bounds struct{ StartNs, EndNs int64 }

// ID is the identity of one emitted entry: the same window and key always
// give the same ID, so a downstream can drop an entry it already has after
// a replay.
type ID struct {
	StartNs, EndNs int64
	Key            string
}

// Entry is one key's state in one emitted window.
type Entry[A any] struct {
	Window Bounds
	Key    string
	// Late counts events of this key that were late for an older window
	// and were counted in this one (the oldest window open when they
	// arrived; see the package doc).
	Late uint64
	// Acc is the accumulator. It is only valid during the emit call: the
	// Windower reuses it afterwards.
	Acc *A
}

// ID returns the entry's identity.
func (e Entry[A]) ID() ID { return ID{e.Window.StartNs, e.Window.EndNs, e.Key} }
