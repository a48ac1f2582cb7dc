package engine

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// benchWorkload is a realistic mix for one h100 engine: prompts of 1-8k
// tokens whose 512-token blocks start with one of 8 system prompts and
// continue with their conversation's context (2000 conversations, so the
// 976-block cache keeps only part of them), outputs of 100-400 tokens, and
// Poisson arrivals at 1.2 requests/s, close to the engine's capacity.
const benchRate = 1.2

type benchWorkload struct {
	reqs   []Request
	gapsNs []int64
}

func newBenchWorkload(n int, ratePerS float64) benchWorkload {
	rng := rand.New(rand.NewPCG(11, 12))
	w := benchWorkload{reqs: make([]Request, n), gapsNs: make([]int64, n)}
	for i := range n {
		conv := uint64(rng.IntN(2000))
		prompt := 1024 + rng.IntN(7168)
		blocks := make([]uint64, (prompt+511)/512)
		for k := range blocks {
			blocks[k] = 1<<40 | conv<<8 | uint64(k)
		}
		blocks[0], blocks[1] = conv%8*2, conv%8*2+1
		w.reqs[i] = Request{ID: uint64(i), PromptTokens: prompt, OutputTokens: 100 + rng.IntN(301), Blocks: blocks}
		w.gapsNs[i] = int64(rng.ExpFloat64() / ratePerS * 1e9)
	}
	return w
}

// BenchmarkEngine drives one engine the way the backtester's event loop
// does: before each arrival, advance through every engine event due
// earlier, then submit. req/s is simulated requests per wall-clock second,
// req/cpu-s per second of the benchmark thread's CPU time (steadier on a
// shared machine).
func BenchmarkEngine(b *testing.B) {
	for _, s := range []Scheduler{SchedulerChunked, SchedulerWhole} {
		b.Run(s.String(), func(b *testing.B) { benchEngine(b, s) })
	}
}

func benchEngine(b *testing.B, s Scheduler) {
	p, _ := DefaultParams("h100")
	p.Scheduler = s
	e, err := New(p)
	if err != nil {
		b.Fatal(err)
	}
	w := newBenchWorkload(1<<16, benchRate)
	var out []Done
	var now int64
	completions, ttftMs := 0, 0.0
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, cpuOK := threadCPUNs()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i % len(w.reqs)
		now += w.gapsNs[j]
		for {
			at, ok := e.NextEventTime()
			if !ok || at >= now {
				break
			}
			out = e.Advance(at, out[:0])
			for _, d := range out {
				ttftMs += d.TTFTMs
			}
			completions += len(out)
		}
		if err := e.Submit(now, w.reqs[j]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if cpu1, ok := threadCPUNs(); ok && cpuOK && cpu1 > cpu0 {
		b.ReportMetric(float64(b.N)/(float64(cpu1-cpu0)/1e9), "req/cpu-s")
	}
	st := e.Stats()
	if st.PromptTokens > 0 {
		b.ReportMetric(float64(st.CachedTokens)/float64(st.PromptTokens), "cache-hit")
	}
	if completions > 0 {
		b.ReportMetric(ttftMs/float64(completions), "ttft-ms")
	}

}
