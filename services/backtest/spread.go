package backtest

import (
	"fmt"
	"slices"
	"strings"
)

// Spread says whether requests that share a timestamp are spread out.
type Spread string

// Spread modes.
const (
	// SpreadAuto spreads when the trace's timestamps are coarse: when at
	// least half of its requests share their timestamp with another one
	// (Mooncake's conversation trace stamps arrivals in 3 s steps, about
	// ten requests a stamp).
	SpreadAuto Spread = "auto"
	// SpreadOn always spreads; SpreadOff never does.
	SpreadOn  Spread = "on"
	SpreadOff Spread = "off"
)

// ParseSpread parses --spread.
func ParseSpread(s string) (Spread, error) {
	switch v := Spread(strings.TrimSpace(s)); v {
	case SpreadAuto, SpreadOn, SpreadOff:
		return v, nil
	}
	return "", fmt.Errorf("unknown --spread %q (want auto, on or off)", s)
}

// coarse reports whether at least half of t's requests (sorted by time)
// share their timestamp with another request.
func coarse(t *Trace) bool {
	shared := 0
	for i := range t.Requests {
		at := t.Requests[i].ArrivalNs
		if (i > 0 && t.Requests[i-1].ArrivalNs == at) || (i+1 < len(t.Requests) && t.Requests[i+1].ArrivalNs == at) {
			shared++
		}
	}
	return 2*shared >= len(t.Requests)
}

// spreadArrivals spreads the n requests stamped with one time t evenly
// over [t, t'), t' being the next stamp: the k-th (in trace order) at
// t + k·(t'−t)/n. A trace recorded in coarse steps otherwise replays
// each step's requests as one burst at its start, a burst no real
// front-end sees and that routers reading metrics polled before it
// (llm-d's 50 ms scrapes) all send to one engine. Order is kept, so the
// turns of a conversation stay in order. The last stamp's requests are
// spread over the median step between stamps. t must be sorted by time.
func spreadArrivals(t *Trace) {
	rs := t.Requests
	step := medianStep(t)
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j].ArrivalNs == rs[i].ArrivalNs {
			j++
		}
		gap := step
		if j < len(rs) {
			gap = rs[j].ArrivalNs - rs[i].ArrivalNs
		}
		n := int64(j - i)
		for k := int64(1); k < n; k++ {
			rs[i+int(k)].ArrivalNs += k * gap / n
		}
		i = j
	}
}

// medianStep is the median gap between consecutive distinct timestamps.
func medianStep(t *Trace) int64 {
	var gaps []int64
	for i := 1; i < len(t.Requests); i++ {
		if d := t.Requests[i].ArrivalNs - t.Requests[i-1].ArrivalNs; d > 0 {
			gaps = append(gaps, d)
		}
	}
	if len(gaps) == 0 {
		return 0
	}
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}
