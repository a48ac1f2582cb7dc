package regress

import "math"

// probe is one candidate of the capacity search, s = ln(c/maxLoad − 1):
// the estimated sse of its TTFT fit with a bound on the estimate's error,
// and the exact sse once a comparison has needed it.
type probe struct {
	s          float64
	est, bound float64
	sse        float64
	known      bool // sse computed
}

// probe estimates the sse at s; without groups (too many distinct loads
// for an estimate to be cheaper) it computes it exactly.
func (d *data) probe(s float64) probe {
	p := probe{s: s}
	if d.groups.of == nil {
		d.exact(&p)
		p.est = p.sse
		return p
	}
	p.est, p.bound = d.groups.estimate(d.capacity(s), d.ttftSums)
	if p.bound == 0 {
		p.sse, p.known = p.est, true
	}
	if !(p.est-p.bound > math.Inf(-1) && p.est+p.bound < math.Inf(1)) {
		p.est, p.bound = 0, math.Inf(1) // decides nothing
	}
	return p
}

// exact is p's sse, computed by ttftLine on first use. Distinct s can
// give the same capacity (near the end of the golden-section search the
// bracket in s is narrower than the capacity's rounding, and more so for
// capacities close to the largest load, where c moves by e^s·ds), and
// ttftLine is a function of the capacity alone: the last few capacities'
// sse are remembered, which spares about a third of the exact fits of a
// backtest's refits, with the same values.
func (d *data) exact(p *probe) float64 {
	if p.known {
		return p.sse
	}
	c := d.capacity(p.s)
	sse, ok := d.recalled(c)
	if !ok {
		sse = d.ttftLine(c).sse
		d.recent[d.nRecent%len(d.recent)] = exactFit{c: c, sse: sse}
		d.nRecent++
	}
	p.sse, p.known = sse, true
	return sse
}

// exactFit is one capacity's exact sse.
type exactFit struct{ c, sse float64 }

// recalled returns the sse of capacity c if it is among the recent ones.
func (d *data) recalled(c float64) (float64, bool) {
	for _, r := range d.recent[:min(d.nRecent, len(d.recent))] {
		if r.c == c {
			return r.sse, true
		}
	}
	return 0, false
}

// atMost reports whether p's exact sse is at most q's, by their estimates
// where the bounds keep them apart.
func (d *data) atMost(p, q *probe) bool {
	switch {
	case p.known && q.known:
	case p.est+p.bound < q.est-q.bound:
		return true
	case p.est-p.bound > q.est+q.bound:
		return false
	}
	return d.exact(p) <= d.exact(q)
}
