package optimize

// Solver solves a sequence of problems over the same clusters, engines and
// routes, as an optimizer re-solving every few seconds does, and keeps the
// solver's model between solves. Resolve takes the values that change
// between such solves (demand, engine profiles and capacities,
// mean_output_tokens, max_utilization, shed_penalty_ms) from the problem
// and does not read network_ms and eligible again: at 100 clusters × 1,000
// engines those are 100,000 map entries, 5-8 ms of a 10-20 ms warm solve.
// Every solution is bit-identical to Solve's on the same problem and
// options.
//
// The zero value is ready; its first solve builds the model. A Solver is
// not safe for concurrent use: one goroutine owns it, as one owns the
// optimizer's solve loop.
type Solver struct {
	m        *model
	clusters []string // the names of m's clusters, in order
	engines  []string // the names of m's engines, in order
	mem      memory
}

// memory is working memory a solve lends to its parts and a Solver keeps
// between solves: only the capacity of its slices carries over, since
// every user writes each value before it reads it. At 100x1000 the bid
// lists alone grow by appending to 1.6 MB per solve.
type memory struct {
	bids   bidLists
	newton *newtonWork // the last solve's Newton system (newtonWork)
	// A state's near lists and evaluation scratch (lend, keep).
	near  nearLists
	arcs  []engineArc
	slots []int32
	on    []float64
	// The last solve's current and trial points (reuse), whose flow
	// lists grew by appending in every solve.
	points [2]*point
}

// lend gives st the memory's near lists and scratch; they are written
// before they are read (the lists start invalid).
func (mem *memory) lend(st *state) {
	st.near, st.arcs, st.slots, st.on = mem.near, mem.arcs, mem.slots, mem.on
	st.near.valid = false
}

// keep takes back what lend gave st, grown as st grew it, and st's
// current and trial points.
func (mem *memory) keep(st *state) {
	mem.near, mem.arcs, mem.slots, mem.on = st.near, st.arcs, st.slots, st.on
	mem.points = [2]*point{st.cur, st.trial}
}

// reuse returns the i-th kept point as newPoint(nc, ne) makes one (every
// value 0, no flows), keeping its memory; a new point when there is none
// of that size, or when both kept points are one.
func (mem *memory) reuse(i, nc, ne int) *point {
	p := mem.points[i]
	mem.points[i] = nil
	if p == nil || p == mem.points[1-i] || len(p.pi) != nc || len(p.lam) != ne {
		return newPoint(nc, ne)
	}
	clear(p.pi)
	clear(p.s)
	clear(p.grad)
	clear(p.lam)
	clear(p.mu)
	clear(p.actStart)
	p.act, p.actX, p.value = p.act[:0], p.actX[:0], 0
	return p
}

// Solve solves p as the package's Solve does, building the model from all
// of p, and keeps the model for Resolve.
func (s *Solver) Solve(p *Problem, opt Options) (*Solution, error) {
	m, err := checkAndBuild(p, opt)
	if err != nil {
		return nil, err
	}
	s.keep(p, m)
	return solveModel(p, m, opt, &s.mem), nil
}

// Resolve solves p, whose network_ms and eligible must be those of the
// problem the Solver's last successful solve built its model from
// (Resolve does not read them). When p's clusters or engines are not the
// same names in the same order, or an engine gains or loses all of its
// capacity (which changes the routes it offers), or the Solver has no
// model yet, it solves as Solve does, building the model from all of p.
// Either way the solution is the one the package's Solve gives for p and
// opt, bit for bit, and so are the errors.
func (s *Solver) Resolve(p *Problem, opt Options) (*Solution, error) {
	if s.m == nil || !s.sameShape(p) || !s.canUpdate(p) {
		return s.Solve(p, opt)
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	s.update(p)
	return solveModel(p, s.m, opt, &s.mem), nil
}

// keep makes m the Solver's model, built from p.
func (s *Solver) keep(p *Problem, m *model) {
	s.m = m
	s.clusters = s.clusters[:0]
	for _, c := range p.Clusters {
		s.clusters = append(s.clusters, c.Name)
	}
	s.engines = s.engines[:0]
	for _, e := range p.Engines {
		s.engines = append(s.engines, e.Name)
	}
}

// sameShape reports whether p lists the model's clusters and engines, by
// name and in order. Names the model was built with are non-empty and
// distinct, so p's are too when this holds.
func (s *Solver) sameShape(p *Problem) bool {
	if len(p.Clusters) != len(s.clusters) || len(p.Engines) != len(s.engines) {
		return false
	}
	for c := range p.Clusters {
		if p.Clusters[c].Name != s.clusters[c] {
			return false
		}
	}
	for e := range p.Engines {
		if p.Engines[e].Name != s.engines[e] {
			return false
		}
	}
	return true
}

// canUpdate reports whether p's values are ones Validate accepts (else
// Solve reports the error) and leave the model's routes as they are:
// every engine has a load cap above 0 exactly when the model's has (the
// model leaves out the routes into engines without capacity).
func (s *Solver) canUpdate(p *Problem) bool {
	if len(p.Demands) > 0 || !inRange(p.MeanOutputTokens) || !inRange(p.ShedPenaltyMs) ||
		!(p.MaxUtilization > 0 && p.MaxUtilization < 1) {
		return false
	}
	for _, c := range p.Clusters {
		if !inRange(c.DemandRps) {
			return false
		}
	}
	for i := range p.Engines {
		e := &p.Engines[i]
		if !inRange(e.CapacityRps) || !inRange(e.MaxLoadRps) || !inRange(e.TTFT.BaseMs) || !inRange(e.TTFT.QueueMs) ||
			!inRange(e.TBOT.BaseMs) || !inRange(e.TBOT.SlopeMs) {
			return false
		}
		if (p.MaxUtilization*e.CapacityRps > 0) != (s.m.eng[i].u > 0) {
			return false
		}
	}
	return true
}

// update sets the model's demand, engine costs and shed penalty from p,
// which canUpdate accepted, exactly as buildModel computes them.
func (s *Solver) update(p *Problem) {
	s.m.setValues(p)
	s.m.setPenalty(p)
}
