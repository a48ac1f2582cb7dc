package console

import (
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// point is one sample of the charted series, in fleet order.
type point struct {
	t        int64 // Unix milliseconds
	clusters []clusterPoint
	load     []float64 // per engine
}

type clusterPoint struct {
	weights []float64 // per engine
	shed    float64
	demand  float64
	sent    float64
	shedRPS float64
	mult    float64
	version uint64

	goodRPS, shedSnapRPS, shedAdmRPS float64
	att1m                            float64 // −1: no outcome in the minute
	// Cumulative traffic counters, for the attainment over a past span;
	// counted is false when the traffic source gave none.
	good, outcomes int64
	counted        bool
}

// history is a ring of the last len(buf) points.
type history struct {
	buf  []point
	next int
	n    int
}

func newHistory(size int) history { return history{buf: make([]point, size)} }

func (h *history) add(p point) {
	h.buf[h.next] = p
	h.next = (h.next + 1) % len(h.buf)
	h.n = min(h.n+1, len(h.buf))
}

// remap moves the points from fleet old's engine and cluster order to
// next's: what both list keeps its values, what next adds is zero (no
// SLO outcome), what it removes is dropped.
func (h *history) remap(old, next *schemas.Fleet) {
	engineAt, clusterAt := map[string]int{}, map[string]int{}
	for i, e := range old.Engines {
		engineAt[e.Name] = i
	}
	for i, cl := range old.Clusters {
		clusterAt[cl.Name] = i
	}
	perEngine := func(v []float64) []float64 {
		out := make([]float64, len(next.Engines))
		for i, e := range next.Engines {
			if j, ok := engineAt[e.Name]; ok && j < len(v) {
				out[i] = v[j]
			}
		}
		return out
	}
	h.each(func(p *point) {
		p.load = perEngine(p.load)
		clusters := make([]clusterPoint, len(next.Clusters))
		for i, cl := range next.Clusters {
			if j, ok := clusterAt[cl.Name]; ok && j < len(p.clusters) {
				clusters[i] = p.clusters[j]
			} else {
				clusters[i] = clusterPoint{mult: 1, att1m: -1}
			}
			clusters[i].weights = perEngine(clusters[i].weights)
		}
		p.clusters = clusters
	})
}

// each calls fn on the points, oldest first.
func (h *history) each(fn func(p *point)) {
	start := (h.next - h.n + len(h.buf)) % len(h.buf)
	for i := range h.n {
		fn(&h.buf[(start+i)%len(h.buf)])
	}
}

// before returns the newest point at or before the Unix millisecond
// cutoff, else the oldest one; nil when there is none.
func (h *history) before(cutoff int64) *point {
	var found *point
	h.each(func(p *point) {
		if found == nil || p.t <= cutoff {
			found = p
		}
	})
	return found
}

// point records the charted values of st. A cluster's weights are what
// its data plane serves, else what the optimizer planned.
func (c *Console) point(st *State, in *inputs, now time.Time) point {
	p := point{t: now.UnixMilli(), load: make([]float64, len(st.Engines))}
	for i, e := range st.Engines {
		if e.Stats != nil {
			p.load[i] = round4(e.Stats.LoadRPS)
		}
	}
	for _, v := range st.Clusters {
		cp := clusterPoint{weights: make([]float64, len(st.Engines)), sent: v.SentRPS, shedRPS: v.ShedRPS, mult: 1,
			goodRPS: v.GoodRPS, shedSnapRPS: v.ShedSnapshotRPS, shedAdmRPS: v.ShedAdmissionRPS, att1m: -1}
		if v.SLO != nil && v.SLO.Outcomes1m > 0 {
			cp.att1m = round4(v.SLO.Attainment1m)
		}
		if t := v.Traffic; t != nil {
			cp.good, cp.outcomes, cp.counted = t.Good, outcomes(t), true
		}
		weights := map[string]float64(nil)
		switch {
		case v.Routing != nil && v.Routing.Ready && len(v.Routing.Weights) > 0:
			weights, cp.shed, cp.version = v.Routing.Weights, v.Routing.ShedFraction, v.Routing.Version
		case v.Plan != nil:
			weights, cp.shed = v.Plan.Weights, v.Plan.ShedFraction
			if in.plan != nil {
				cp.version = in.plan.Version
			}
		}
		for i, e := range st.Engines {
			cp.weights[i] = weights[e.Name]
		}
		switch {
		case v.Traffic != nil:
			cp.demand, cp.mult = round4(v.Traffic.DemandRPS), v.Traffic.Multiplier
		case v.Plan != nil:
			cp.demand = round4(v.Plan.DemandRPS)
		}
		p.clusters = append(p.clusters, cp)
	}
	return p
}

// columns turns the ring into the page's columnar series.
func (h *history) columns(f *schemas.Fleet) History {
	out := History{T: make([]int64, 0, h.n), EngineLoadRPS: make([][]float64, len(f.Engines))}
	for e := range f.Engines {
		out.EngineLoadRPS[e] = make([]float64, 0, h.n)
	}
	for _, cl := range f.Clusters {
		ch := ClusterHistory{Cluster: cl.Name, Weights: make([][]float64, len(f.Engines)),
			Shed: make([]float64, 0, h.n), DemandRPS: make([]float64, 0, h.n), SentRPS: make([]float64, 0, h.n),
			ShedRPS: make([]float64, 0, h.n), Multiplier: make([]float64, 0, h.n), Version: make([]uint64, 0, h.n),
			GoodRPS: make([]float64, 0, h.n), ShedSnapshotRPS: make([]float64, 0, h.n),
			ShedAdmissionRPS: make([]float64, 0, h.n), Attainment1m: make([]float64, 0, h.n)}
		for e := range f.Engines {
			ch.Weights[e] = make([]float64, 0, h.n)
		}
		out.Clusters = append(out.Clusters, ch)
	}
	h.each(func(p *point) {
		out.T = append(out.T, p.t)
		for e := range out.EngineLoadRPS {
			out.EngineLoadRPS[e] = append(out.EngineLoadRPS[e], p.load[e])
		}
		for c := range out.Clusters {
			ch, cp := &out.Clusters[c], &p.clusters[c]
			for e := range ch.Weights {
				ch.Weights[e] = append(ch.Weights[e], cp.weights[e])
			}
			ch.Shed = append(ch.Shed, cp.shed)
			ch.DemandRPS = append(ch.DemandRPS, cp.demand)
			ch.SentRPS = append(ch.SentRPS, cp.sent)
			ch.ShedRPS = append(ch.ShedRPS, cp.shedRPS)
			ch.Multiplier = append(ch.Multiplier, cp.mult)
			ch.Version = append(ch.Version, cp.version)
			ch.GoodRPS = append(ch.GoodRPS, cp.goodRPS)
			ch.ShedSnapshotRPS = append(ch.ShedSnapshotRPS, cp.shedSnapRPS)
			ch.ShedAdmissionRPS = append(ch.ShedAdmissionRPS, cp.shedAdmRPS)
			ch.Attainment1m = append(ch.Attainment1m, cp.att1m)
		}
	})
	return out
}
