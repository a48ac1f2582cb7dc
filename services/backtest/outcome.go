package backtest

import "math"

// Outcomes of a request, as the per-request records name them.
const (
	OutcomeServed = "served"
	OutcomeShed   = "shed"
	OutcomeFailed = "failed"
)

// outcome kinds, by request index.
const (
	outNone uint8 = iota // not finished (never, once the simulation ended)
	outServed
	outShed
	outFailed
)

var outcomeNames = [...]string{outNone: "", outServed: OutcomeServed, outShed: OutcomeShed, outFailed: OutcomeFailed}

// outcomes are one simulation's per-request results, by request index:
// what `--requests` writes and every aggregate of PolicyResult is
// computed from, so that the aggregates can be recomputed from the rows.
type outcomes struct {
	kind   []uint8
	engine []int16 // the engine it was sent to, -1 none (shed, or failed before routing)
	// Latencies in ms, network included for TTFT and end-to-end; NaN
	// unless served.
	ttft, e2e, tbot []float64
	cached          []int32 // prompt tokens found in the KV cache; served only
}

func newOutcomes(n int) *outcomes {
	o := &outcomes{kind: make([]uint8, n), engine: make([]int16, n),
		ttft: make([]float64, n), e2e: make([]float64, n), tbot: make([]float64, n), cached: make([]int32, n)}
	for i := range n {
		o.engine[i] = -1
		o.ttft[i], o.e2e[i], o.tbot[i] = math.NaN(), math.NaN(), math.NaN()
	}
	return o
}

// SLO is the service-level objective a run is judged by (the fleet file's
// ttft_slo_ms and tbot_slo_ms).
type SLO struct {
	TTFTMs float64 `json:"ttft_ms"`
	TBOTMs float64 `json:"tbot_ms"`
}

// Met reports whether a served request with these latencies meets the SLO.
// A request of one output token has no time between tokens (0).
func (s SLO) Met(ttftMs, tbotMs float64) bool { return ttftMs <= s.TTFTMs && tbotMs <= s.TBOTMs }

// good reports whether request i was served within slo.
func (o *outcomes) good(i int, slo SLO) bool {
	return o.kind[i] == outServed && slo.Met(o.ttft[i], o.tbot[i])
}
