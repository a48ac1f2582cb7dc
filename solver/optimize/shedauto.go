package optimize

import "math"

// autoPenalty is the shed penalty of a problem whose shed_penalty_ms is 0
// (automatic): twice the largest marginal cost of serving a request on
// any engine at its utilisation cap, plus the largest network time.
//
// With it, refusing is dearer than serving anywhere below the caps, so
// the optimum sheds only demand that cannot be served within the engines'
// capacity caps, and only the excess (shedding as a last resort): if a
// solution with less shed existed, moving towards it would lower the
// objective at a rate of at least penalty − (marginal cost at the cap +
// network) > 0. Among the solutions that shed the least, it minimises
// latency as before.
func (m *model) autoPenalty() float64 {
	worst := 0.0
	for i := range m.eng {
		if d := m.eng[i].d1u; !math.IsInf(d, 0) && !math.IsNaN(d) {
			worst = max(worst, d)
		}
	}
	net := 0.0
	for _, ms := range m.arcNet {
		net = max(net, ms)
	}
	return 2*(worst+net) + 1
}
