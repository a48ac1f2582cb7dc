package console

import (
	"context"
	"time"
)

// inputs are one round of source reads.
type inputs struct {
	plan    *Plan
	routing map[string]*Routing
	engines map[string]*EngineStats
	traffic map[string]*TrafficCluster
	errs    map[string]string
}

// read calls every source, each bounded by SourceTimeout.
func (c *Console) read(ctx context.Context, now time.Time) inputs {
	in := inputs{routing: map[string]*Routing{}, engines: map[string]*EngineStats{},
		traffic: map[string]*TrafficCluster{}, errs: map[string]string{}}
	call := func(name string, fn func(context.Context) error) {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.SourceTimeout)
		defer cancel()
		if err := fn(cctx); err != nil {
			in.errs[name] = err.Error()
		}
	}
	if c.src.Plan != nil {
		call("optimizer", func(ctx context.Context) error {
			p, err := c.src.Plan.Plan(ctx)
			if err == nil {
				p.clean()
				in.plan = &p
			}
			return err
		})
	}
	if c.src.Routing != nil {
		call("dataplane", func(ctx context.Context) error {
			rs, err := c.src.Routing.Routing(ctx)
			for i := range rs {
				rs[i].clean()
				in.routing[rs[i].Cluster] = &rs[i]
			}
			return err
		})
	}
	if c.src.Engines != nil {
		call("aggregator", func(ctx context.Context) error {
			es, err := c.src.Engines.Engines(ctx)
			for i := range es {
				es[i].clean()
				in.engines[es[i].Name] = &es[i]
			}
			return err
		})
	}
	c.carryEngines(&in, now)
	if c.src.Traffic != nil {
		call("traffic", func(ctx context.Context) error {
			ts, err := c.src.Traffic.Traffic(ctx)
			for i := range ts {
				ts[i].clean()
				in.traffic[ts[i].Cluster] = &ts[i]
			}
			return err
		})
	}
	return in
}

// emptyState is the state before the first sample.
func (c *Console) emptyState(now time.Time) State {
	st := State{Title: c.cfg.Title, Now: now, SampleSeconds: c.cfg.SampleInterval.Seconds(), Links: c.cfg.Links,
		MembersURL: c.cfg.MembersURL}
	if st.Links == nil {
		st.Links = []Link{}
	}
	for _, e := range c.cfg.Fleet.Engines {
		st.Engines = append(st.Engines, EngineView{Name: e.Name, Region: e.Region, SKU: e.SKU,
			Color: c.colors[e.Name], Available: true})
	}
	for _, cl := range c.cfg.Fleet.Clusters {
		st.Clusters = append(st.Clusters, ClusterView{Name: cl.Name, Region: cl.Region})
	}
	st.History = c.hist.columns(c.cfg.Fleet)
	return st
}

// sample reads the sources and builds the state at now.
func (c *Console) sample(ctx context.Context, now time.Time) State {
	c.takeFleet()
	in := c.read(ctx, now)
	c.samples++
	st := c.emptyState(now)
	if !c.started.IsZero() {
		st.UptimeSeconds = now.Sub(c.started).Seconds()
	}
	st.Samples = c.samples
	c.fillEngines(&st, &in, now)
	c.observeWindows(&st)
	c.calibrate(&st, in.plan)
	c.fillClusters(&st, &in, now)
	if in.plan != nil {
		st.Optimizer = planView(in.plan, now)
	}
	if len(in.traffic) > 0 {
		st.Traffic = trafficView(st.Clusters)
	}
	if len(in.errs) > 0 {
		st.Errors = in.errs
	}
	c.hist.add(c.point(&st, &in, now))
	st.History = c.hist.columns(c.cfg.Fleet)
	c.remember(&in, now)
	return st
}

func (c *Console) fillEngines(st *State, in *inputs, now time.Time) {
	for i := range st.Engines {
		e := &st.Engines[i]
		e.Stats = in.engines[e.Name]
		var picks int64
		for _, cl := range c.cfg.Fleet.Clusters {
			r := in.routing[cl.Name]
			if r == nil {
				continue
			}
			for _, re := range r.Engines {
				if re.Name != e.Name {
					continue
				}
				e.InFlight += re.InFlight
				picks += re.Picks
				if !re.Available && e.Available {
					e.Available, e.Reason = false, re.Reason
				}
			}
		}
		if p, ok := c.prev.picks[e.Name]; ok && len(in.routing) > 0 {
			e.PickRPS = rate(picks, p.n, now.Sub(p.at))
		}
	}
}

func (c *Console) fillClusters(st *State, in *inputs, now time.Time) {
	for i := range st.Clusters {
		v := &st.Clusters[i]
		v.Routing = in.routing[v.Name]
		if in.plan != nil {
			for j := range in.plan.Clusters {
				if in.plan.Clusters[j].Cluster == v.Name {
					v.Plan = &in.plan.Clusters[j]
				}
			}
		}
		c.refusalRates(v, now)
		t := in.traffic[v.Name]
		v.Traffic = t
		if t == nil {
			continue
		}
		v.CacheHitRatio = round4(ratio(t.CachedTokens, t.PromptTokens))
		v.SameEngineRatio = round4(ratio(t.SameEngine, t.FollowUps))
		v.SLO = c.sloView(i, t, now)
		p, ok := c.prev.traffic[v.Name]
		if !ok {
			continue
		}
		dt := now.Sub(p.at)
		v.SentRPS, v.OKRPS, v.GoodRPS = rate(t.Sent, p.t.Sent, dt), rate(t.OK, p.t.OK, dt), rate(t.Good, p.t.Good, dt)
		v.ShedRPS, v.ErrorRPS = rate(t.Shed, p.t.Shed, dt), rate(t.Errors, p.t.Errors, dt)
	}
}

// refusalRates sets v's data-plane refusals per second, by reason, from
// its routing counters and the last sample's.
func (c *Console) refusalRates(v *ClusterView, now time.Time) {
	r := v.Routing
	if r == nil {
		return
	}
	if p, ok := c.prev.routing[v.Name]; ok {
		dt := now.Sub(p.at)
		v.ShedSnapshotRPS, v.ShedAdmissionRPS = rate(r.ShedTotal, p.shed, dt), rate(r.RefusedTotal, p.refused, dt)
	}
}

// rate is the per-second increase of a counter over dt; a counter that
// went back (a restart) gives 0.
func rate(now, before int64, dt time.Duration) float64 {
	if dt <= 0 || now < before {
		return 0
	}
	return round4(float64(now-before) / dt.Seconds())
}

func planView(p *Plan, now time.Time) *PlanView {
	v := &PlanView{Version: p.Version, SolvedAt: p.SolvedAt, Solves: p.Solves, ObjectiveMs: p.ObjectiveMs, Status: p.Status}
	if !p.SolvedAt.IsZero() {
		v.AgeSeconds = round4(max(0, now.Sub(p.SolvedAt).Seconds()))
	}
	return v
}

func trafficView(cs []ClusterView) *TrafficView {
	v := &TrafficView{}
	for _, c := range cs {
		t := c.Traffic
		if t == nil {
			continue
		}
		v.DemandRPS += t.DemandRPS
		v.SentRPS += c.SentRPS
		v.OKRPS += c.OKRPS
		v.GoodRPS += c.GoodRPS
		v.ShedRPS += c.ShedRPS
		v.ErrorRPS += c.ErrorRPS
		v.Sent += t.Sent
		v.OK += t.OK
		v.Good += t.Good
		v.Shed += t.Shed
		v.Errors += t.Errors
		v.Dropped += t.Dropped
		v.InFlight += t.InFlight
	}
	v.DemandRPS, v.SentRPS, v.OKRPS, v.GoodRPS = round4(v.DemandRPS), round4(v.SentRPS), round4(v.OKRPS), round4(v.GoodRPS)
	v.ShedRPS, v.ErrorRPS = round4(v.ShedRPS), round4(v.ErrorRPS)
	return v
}

// remember keeps this sample's counters, stamped, for the next one's
// rates. A source that failed keeps its older counters, so the rate after
// the gap spans the gap.
func (c *Console) remember(in *inputs, now time.Time) {
	if c.prev.traffic == nil {
		c.prev.traffic, c.prev.picks = map[string]stampedTraffic{}, map[string]stampedCount{}
		c.prev.routing = map[string]stampedRefusals{}
	}
	for name, t := range in.traffic {
		c.prev.traffic[name] = stampedTraffic{t: *t, at: now}
	}
	for name, r := range in.routing {
		c.prev.routing[name] = stampedRefusals{shed: r.ShedTotal, refused: r.RefusedTotal, at: now}
	}
	if len(in.routing) > 0 {
		for _, e := range c.cfg.Fleet.Engines {
			var picks int64
			for _, r := range in.routing {
				for _, re := range r.Engines {
					if re.Name == e.Name {
						picks += re.Picks
					}
				}
			}
			c.prev.picks[e.Name] = stampedCount{n: picks, at: now}
		}
	}
}

// carryEngines fills in engines missing from this read with their last
// stats, for up to Config.EngineStatsTTL: features arrive window by window
// and partition by partition, so one read rarely has every engine, and a
// missing row is no news, not zero load.
func (c *Console) carryEngines(in *inputs, now time.Time) {
	if c.prev.engines == nil {
		c.prev.engines = map[string]stampedEngine{}
	}
	for _, e := range c.cfg.Fleet.Engines {
		if st, ok := in.engines[e.Name]; ok {
			c.prev.engines[e.Name] = stampedEngine{s: *st, at: now}
			continue
		}
		if p, ok := c.prev.engines[e.Name]; ok && now.Sub(p.at) <= c.cfg.EngineStatsTTL {
			st := p.s
			in.engines[e.Name] = &st
		}
	}
}
