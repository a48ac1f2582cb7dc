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
	m, _ := buildModel(p)
	return m
}

// buildModel builds the model of a Problem whose fields other than
// network_ms Validate accepted, checking network_ms on the way (an
// unknown engine or a number out of range fails it; Validate then says
// which): a dense row (an eighth of the engines or more) read engine by
// engine, a sparse one in map order and sorted by engine.
func buildModel(p *Problem) (*model, bool) {
	m := &model{
		nc: len(p.Clusters), ne: len(p.Engines),
		demand:   make([]float64, len(p.Clusters)),
		eng:      make([]engineCost, len(p.Engines)),
		arcStart: make([]int32, len(p.Clusters)+1),
	}
	m.setValues(p)
	engIndex := make(map[string]int32, m.ne)
	for i, e := range p.Engines {
		engIndex[e.Name] = int32(i)
	}
	arcs := 0
	for _, cl := range p.Clusters {
		arcs += len(p.NetworkMs[cl.Name])
	}
	m.arcEng = make([]int32, 0, arcs)
	m.arcNet = make([]float64, 0, arcs)
	allowed := make([]bool, m.ne)
	type pair struct {
		e   int32
		net float64
	}
	var sparse []pair
	rows := 0
	for c, cl := range p.Clusters {
		if _, ok := p.NetworkMs[cl.Name]; ok {
			rows++
		}
		elig, restricted := p.Eligible[cl.Name]
		for _, name := range elig {
			allowed[engIndex[name]] = true
		}
		usable := func(e int32) bool { return (!restricted || allowed[e]) && m.eng[e].u > 0 }
		row := p.NetworkMs[cl.Name]
		if len(row) >= m.ne/8 {
			// A dense row is read engine by engine, one map read each
			// rather than a step of the map's iteration and a read of
			// engIndex: the arcs in engine order as a sort would give. A
			// name that is no engine's leaves some of the row unread.
			found := 0
			for i := range p.Engines {
				v, ok := row[p.Engines[i].Name]
				if !ok {
					continue
				}
				if !inRange(v) {
					return nil, false
				}
				found++
				if e := int32(i); usable(e) {
					m.arcEng = append(m.arcEng, e)
					m.arcNet = append(m.arcNet, v)
				}
			}
			if found != len(row) {
				return nil, false
			}
		} else {
			sparse = sparse[:0]
			for name, v := range row {
				e, ok := engIndex[name]
				if !ok || !inRange(v) {
					return nil, false
				}
				if usable(e) {
					sparse = append(sparse, pair{e, v})
				}
			}
			slices.SortFunc(sparse, func(a, b pair) int { return int(a.e - b.e) })
			for _, r := range sparse {
				m.arcEng = append(m.arcEng, r.e)
				m.arcNet = append(m.arcNet, r.net)
			}
		}
		for _, name := range elig {
			allowed[engIndex[name]] = false
		}
		m.arcStart[c+1] = int32(len(m.arcEng))
	}
	if rows != len(p.NetworkMs) {
		return nil, false // a row for a cluster the problem does not have
	}
	m.groupByEngine()
	m.setPenalty(p)
	return m, true
}

// setValues sets the model's demand and engine costs from p (buildModel,
// and Solver.update for a problem of the same routes).
func (m *model) setValues(p *Problem) {
	m.total = 0
	for c, cl := range p.Clusters {
		m.demand[c] = cl.DemandRps
		m.total += cl.DemandRps
	}
	for i, e := range p.Engines {
		m.eng[i] = newEngineCost(e, p.MeanOutputTokens, p.MaxUtilization)
	}
}

// setPenalty sets the shed penalty from p, automatic when p's is 0: after
// the routes, which the automatic one reads.
func (m *model) setPenalty(p *Problem) {
	m.penalty = p.ShedPenaltyMs
	if m.penalty == 0 {
		m.penalty = m.autoPenalty()
	}
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
