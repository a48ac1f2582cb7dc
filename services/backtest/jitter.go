package backtest

import (
	"math/rand/v2"
	"time"
)

// jitterSalt separates the jitter's random stream from the other uses of
// the seed.
const jitterSalt = 0x6a6974746572 // "jitter"

// jitterArrivals moves each request later by a random share of
// min(jitter, the gap to the next request's arrival), drawn from seed, so
// that no request passes the next one: the order, and with it the order
// of a conversation's turns, is kept. The simulation is chaotic in the
// small (a change in the last bits of one weight moves an hour's SLO
// attainment by tenths of a point; README.md here, "Noise"), and the
// trace's own timestamps leave nothing to chance: runs with a millisecond
// of jitter and different seeds show how much a result moves by chance,
// for every policy alike. t must be sorted by time.
func jitterArrivals(t *Trace, jitter time.Duration, seed uint64) {
	if jitter <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(seed, jitterSalt))
	rs := t.Requests
	for i := range rs {
		room := int64(jitter)
		if i+1 < len(rs) {
			room = min(room, rs[i+1].ArrivalNs-rs[i].ArrivalNs)
		}
		if room > 0 {
			rs[i].ArrivalNs += rng.Int64N(room)
		}
	}
}
