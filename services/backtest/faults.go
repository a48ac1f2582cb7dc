package backtest

import (
	"cmp"
	"fmt"
	"slices"
)

// fault is a failure or recovery at a time.
type fault struct {
	at     int64
	engine int
	fail   bool
}

func (s *sim) faults() ([]fault, error) {
	var out []fault
	for _, f := range s.cfg.Failures {
		e, ok := s.fi.engineIndex(f.Engine)
		if !ok {
			return nil, fmt.Errorf("backtest: --fail: engine %q is not in the fleet", f.Engine)
		}
		out = append(out, fault{at: int64(f.At), engine: e, fail: true})
		if f.For > 0 {
			out = append(out, fault{at: int64(f.At + f.For), engine: e})
		}
	}
	slices.SortStableFunc(out, func(a, b fault) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmpBool(a.fail, b.fail) // a recovery first
	})
	return out, nil
}

// applyFault fails or recovers an engine. A failure fails the requests in
// flight on it, resets it (its KV cache is lost) and marks it unhealthy.
func (s *sim) applyFault(f fault) {
	e, eng := f.engine, s.engines[f.engine]
	s.changes[e]++
	if !f.fail {
		s.down[e] = false
		eng.SetHealthy(true)
		return
	}
	if s.down[e] {
		return
	}
	s.down[e] = true
	s.advance(e, s.now)
	for i, st := range s.state {
		if st == stInFlight && int(s.reqEngine[i]) == e {
			s.state[i] = stDone
			c := int(s.w.row[i])
			s.inflight[e]--
			s.inflightCE[c*len(s.fi.engines)+e]--
			s.inflightC[c]--
			s.rec.fail(s, i)
			if s.hooks != nil {
				s.hooks.completed(s, i, e, true)
			}
			if s.onDone != nil {
				s.onDone(s, i, e)
			}
		}
	}
	s.busyCarry[e] += eng.Stats().BusyNs()
	eng.Reset()
	eng.SetHealthy(false)
	s.heap.set(e, 0, false)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
