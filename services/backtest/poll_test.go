package backtest

import "testing"

func TestNextPoll(t *testing.T) {
	for _, tc := range []struct{ at, every, next, want int64 }{
		{0, 50, 30, 50},     // an event before the next tick: the tick as usual
		{0, 50, 50, 50},     // an event at the next tick comes first: kept
		{0, 50, 120, 150},   // 50 and 100 would see what 0 saw
		{0, 50, 100, 100},   // the tick at the event is kept
		{100, 50, 101, 150}, // one tick ahead
		{0, 50, never, 50},  // no next event: one by one
		{7, 10, 1_000_007, 1_000_007},
	} {
		if got := nextPoll(tc.at, tc.every, tc.next); got != tc.want {
			t.Errorf("nextPoll(%d, %d, %d) = %d, want %d", tc.at, tc.every, tc.next, got, tc.want)
		}
	}
}
