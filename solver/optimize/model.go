package optimize

import "slices"

// model is a validated Problem in dense, index-ordered form: clusters and
// engines are numbered in the order the Problem lists them, and each
// cluster's usable engines (eligible, with a network time, capacity > 0)
// are in ascending engine order. Nothing below depends on map order.
type model struct {
	nc, ne  int
	demand  []float64 // rps, per cluster
	total   float64   // Σ demand
	penalty float64   // shed_penalty_ms
	eng     []engineCost

	// arcs grouped by cluster: cluster c owns arcs arcStart[c]..arcStart[c+1].
	arcStart []int32
	arcEng   []int32
	arcNet   []float64 // network ms

	// The same arcs grouped by engine ("slots"): engine e owns slots
	// eStart[e]..eStart[e+1], clusters ascending within an engine.
	eStart  []int32
	slotArc []int32
	slotClu []int32
	slotNet []float64
	arcSlot []int32
	slotIDs []int32 // 0, 1, 2, …: slots as a list
}

// newModel builds the model of a Problem that Validate accepted.
func newModel(p *Problem) *model {
	m := &model{
		nc: len(p.Clusters), ne: len(p.Engines),
		demand:   make([]float64, len(p.Clusters)),
		penalty:  p.ShedPenaltyMs,
		eng:      make([]engineCost, len(p.Engines)),
		arcStart: make([]int32, len(p.Clusters)+1),
	}
	engIndex := make(map[string]int32, m.ne)
	for i, e := range p.Engines {
		engIndex[e.Name] = int32(i)
		m.eng[i] = newEngineCost(e, p.MeanOutputTokens, p.MaxUtilization)
	}
	allowed := make([]bool, m.ne)
	type pair struct {
		e   int32
		net float64
	}
	var row []pair
	for c, cl := range p.Clusters {
		m.demand[c] = cl.DemandRps
		m.total += cl.DemandRps
		elig, restricted := p.Eligible[cl.Name]
		for _, name := range elig {
			allowed[engIndex[name]] = true
		}
		row = row[:0]
		net := p.NetworkMs[cl.Name]
		usable := func(e int32) bool { return (!restricted || allowed[e]) && m.eng[e].u > 0 }
		if len(net) >= m.ne/8 {
			// Dense row: visit engines in order, no sort needed.
			for e, en := range p.Engines {
				if ms, ok := net[en.Name]; ok && usable(int32(e)) {
					row = append(row, pair{int32(e), ms})
				}
			}
		} else {
			for name, ms := range net {
				if e := engIndex[name]; usable(e) {
					row = append(row, pair{e, ms})
				}
			}
			slices.SortFunc(row, func(a, b pair) int { return int(a.e - b.e) })
		}
		for _, name := range elig {
			allowed[engIndex[name]] = false
		}
		for _, r := range row {
			m.arcEng = append(m.arcEng, r.e)
			m.arcNet = append(m.arcNet, r.net)
		}
		m.arcStart[c+1] = int32(len(m.arcEng))
	}
	m.groupByEngine()
	if m.penalty == 0 {
		m.penalty = m.autoPenalty()
	}
	return m
}

// groupByEngine fills the slot arrays by a counting sort on engine.
func (m *model) groupByEngine() {
	n := len(m.arcEng)
	m.eStart = make([]int32, m.ne+1)
	for _, e := range m.arcEng {
		m.eStart[e+1]++
	}
	for e := range m.ne {
		m.eStart[e+1] += m.eStart[e]
	}
	m.slotArc = make([]int32, n)
	m.slotClu = make([]int32, n)
	m.slotNet = make([]float64, n)
	m.arcSlot = make([]int32, n)
	m.slotIDs = make([]int32, n)
	for i := range m.slotIDs {
		m.slotIDs[i] = int32(i)
	}
	next := append([]int32(nil), m.eStart[:m.ne]...)
	for c := range m.nc {
		lo, hi := m.arcs(c)
		for a := lo; a < hi; a++ {
			e := m.arcEng[a]
			k := next[e]
			next[e]++
			m.slotArc[k], m.slotClu[k], m.slotNet[k] = int32(a), int32(c), m.arcNet[a]
			m.arcSlot[a] = k
		}
	}
}

// arcs returns cluster c's arc index range.
func (m *model) arcs(c int) (lo, hi int) { return int(m.arcStart[c]), int(m.arcStart[c+1]) }

// clusterOfArc is the cluster owning arc a.
func clusterOfArc(m *model, a int32) int32 { return m.slotClu[m.arcSlot[a]] }

// engineSlotRange lists all of engine e's slots.
func (m *model) engineSlotRange(e int) []int32 { return m.slotIDs[m.eStart[e]:m.eStart[e+1]] }
