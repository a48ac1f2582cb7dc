package backtest

import (
	"math"

	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// The data plane's local admission in the backtester (routing.Admit): a
// cluster's data plane sees each engine's queue as its last status
// reported it plus the requests it has sent it since.

// setLimits installs the engines' queue limits (by engine index; nil
// turns local admission off).
func (p *tablePicker) setLimits(limits []float64) { p.limits = limits }

// waiting is engine e's queue as cluster c's data plane estimates it.
func (p *tablePicker) waiting(c, e int) float64 {
	s := p.s
	n := 0.0
	if p.sentGen[c] == s.statusGen {
		n = float64(p.sentBy[c*len(s.fi.engines)+e])
	}
	return float64(s.waitSeen[e]) + n
}

// sent counts a request of cluster c sent to engine e.
func (p *tablePicker) sent(c, e int) {
	s := p.s
	ne := len(s.fi.engines)
	if p.sentGen[c] != s.statusGen {
		clear(p.sentBy[c*ne : (c+1)*ne])
		p.sentGen[c] = s.statusGen
	}
	p.sentBy[c*ne+e]++
}

// admits reports whether table engine idx of cluster p.c admits a
// request (ongoing: of a conversation under way).
func (p *tablePicker) admits(idx int, ongoing bool) bool {
	e := int(p.toEngine[p.c][idx])
	return routing.Admit(p.waiting(p.c, e), p.limits[e], ongoing)
}

// refuses is the skip of the admission spill: unusable, or over its limit.
func (p *tablePicker) refuses(idx int) bool { return !p.usable(idx) || !p.admits(idx, p.ongoing) }

// lighter is routing.SecondChoice for a new conversation of cluster p.c:
// the load of an engine is its queue and batch as the data plane sees them
// (last status plus what it sent since) over its queue limit, which is
// proportional to its capacity.
func (p *tablePicker) lighter(t *sched.Table, h uint64, idx int) int {
	return routing.SecondChoice(t, h, idx, p.closed, p.load)
}

func (p *tablePicker) load(i int) float64 {
	e := int(p.toEngine[p.c][i])
	if !(p.limits[e] > 0) {
		return math.Inf(1)
	}
	return (p.waiting(p.c, e) + float64(p.s.runSeen[e])) / p.limits[e]
}
