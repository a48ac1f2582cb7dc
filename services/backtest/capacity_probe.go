package backtest

import (
	"github.com/ilb-router/ilb/solver/engine"
)

// probeRequests is how many of the trace's requests measureCapacity
// offers an engine at once.
const probeRequests = 1000

// measureCapacity is the throughput, in requests per second, of an engine
// with parameters p kept saturated with the workload's requests: up to
// probeRequests of them, evenly spread over the trace, all queued at time
// 0; the rate is measured between the 10th and the 90th percentile of
// their completions, leaving out the start (an empty cache, a filling
// batch) and the tail (a draining batch). It is what the engine model can
// serve of this trace's mix, the check on a model's capacity.
func measureCapacity(p engine.Params, w *workload) float64 {
	var pool enginePool
	return measureCapacityWith(&pool, p, w)
}

// measureCapacityWith is measureCapacity with an engine from pool.
func measureCapacityWith(pool *enginePool, p engine.Params, w *workload) float64 {
	eng, err := pool.get(p)
	if err != nil || w.len() == 0 {
		return 0
	}
	defer pool.put(eng)
	n := min(probeRequests, w.len())
	step := max(w.len()/n, 1)
	submitted := 0
	for i := 0; i < w.len() && submitted < n; i += step {
		r := engine.Request{ID: uint64(i), Tag: uint64(i), PromptTokens: int(w.prompt[i]), OutputTokens: int(w.output[i]),
			Blocks: w.blocks[w.blockOff[i]:w.blockOff[i+1]]}
		if eng.Submit(0, r) != nil {
			return 0
		}
		submitted++
	}
	var done []engine.Done
	var finish []int64
	for {
		t, busy := eng.NextEventTime()
		if !busy {
			break
		}
		done = eng.Advance(t, done[:0])
		for _, d := range done {
			finish = append(finish, d.FinishNs)
		}
	}
	lo, hi := len(finish)/10, len(finish)*9/10
	if hi <= lo || finish[hi] <= finish[lo] {
		return 0
	}
	return float64(hi-lo) / (float64(finish[hi]-finish[lo]) / 1e9)
}
