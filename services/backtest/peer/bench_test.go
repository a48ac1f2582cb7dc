package peer

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkRouters measures one router's Pick (and its completion hooks)
// alone, over a Mooncake-like stream: 2000 conversations whose turns grow
// by one to three 512-token blocks, all sharing a first block, 24 blocks
// a request on average, over ten engines. The simulator's own cost is in
// services/backtest's BenchmarkBacktest.
func BenchmarkRouters(b *testing.B) {
	reqs := mooncakeLike(20000)
	for _, pol := range Policies() {
		b.Run(pol.Name, func(b *testing.B) {
			f := testFleet(10, 64, 500_000, 9000)
			v := newTestView(10)
			type flight struct {
				r *Request
				e int
			}
			var ring [200]flight
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%len(reqs) == 0 {
					b.StopTimer()
					r, _ := pol.New(f, 0, 1)
					ring = [200]flight{}
					b.StartTimer()
					benchRouter = r
				}
				r := &reqs[i%len(reqs)]
				v.now = int64(i) * 300e6
				e := benchRouter.Pick(v, r)
				if o, ok := benchRouter.(FirstTokenObserver); ok && e >= 0 {
					o.FirstToken(v, r, e)
				}
				// Each request completes 200 picks later.
				if old := ring[i%len(ring)]; old.r != nil {
					if o, ok := benchRouter.(CompletionObserver); ok {
						o.Completed(v, old.r, old.e, false)
					}
				}
				ring[i%len(ring)] = flight{r, e}
				if e < 0 {
					ring[i%len(ring)] = flight{}
				}
			}
		})
	}
}

var benchRouter Router

func mooncakeLike(n int) []Request {
	rng := rand.New(rand.NewPCG(1, 2))
	type conv struct{ blocks []uint64 }
	convs := make([]conv, 2000)
	next := uint64(1)
	var out []Request
	for i := range n {
		c := &convs[rng.IntN(len(convs))]
		if len(c.blocks) == 0 || len(c.blocks) > 60 {
			c.blocks = []uint64{0}
		}
		for range 1 + rng.IntN(3) {
			c.blocks = append(c.blocks, next)
			next++
		}
		if i%8 == 0 { // a new conversation now and then starts deep
			for range 20 {
				c.blocks = append(c.blocks, next)
				next++
			}
		}
		bl := append([]uint64(nil), c.blocks...)
		out = append(out, Request{ID: i, Key: uint64(i % 2000), PromptTokens: 512*len(bl) - 100, OutputTokens: 300, Blocks: bl})
	}
	return out
}
