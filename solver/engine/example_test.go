package engine_test

import (
	"fmt"

	"github.com/ilb-router/ilb/solver/engine"
)

// An event loop drives the engine in virtual time: submit arrivals, then
// advance to each next event.
func Example() {
	p, _ := engine.DefaultParams("h100")
	e, err := engine.New(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	const ms = 1_000_000 // nanoseconds
	turn1 := engine.Request{ID: 1, PromptTokens: 2048, OutputTokens: 100, Blocks: []uint64{11, 12, 13, 14}}
	turn2 := engine.Request{ID: 2, PromptTokens: 3072, OutputTokens: 100, Blocks: []uint64{11, 12, 13, 14, 15, 16}}
	_ = e.Submit(0, turn1)
	var done []engine.Done
	for at, ok := e.NextEventTime(); ok; at, ok = e.NextEventTime() {
		done = e.Advance(at, done)
	}
	_ = e.Submit(10_000*ms, turn2) // the follow-up turn, 10 s later
	for at, ok := e.NextEventTime(); ok; at, ok = e.NextEventTime() {
		done = e.Advance(at, done)
	}
	for _, d := range done {
		fmt.Printf("request %d: cached %d tokens, TTFT %.1f ms, TBOT %.2f ms\n", d.ID, d.CachedTokens, d.TTFTMs, d.TBOTMs)
	}
	// Output:
	// request 1: cached 0 tokens, TTFT 249.6 ms, TBOT 29.24 ms
	// request 2: cached 2048 tokens, TTFT 139.2 ms, TBOT 29.24 ms
}
