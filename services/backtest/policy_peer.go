package backtest

import (
	"fmt"
	"math"
	"time"

	"github.com/ilb-router/ilb/services/backtest/peer"
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/solver/sched"
)

// peerPolicy runs a package peer policy: one peer.Router per front-end
// cluster, each with its own state and only its own signals (its
// dispatches, the first tokens and completions of its own requests, and
// the engine metrics it polls). Requests a router defers wait in its
// queue, offered to it again after each of its first tokens and
// completions.
type peerPolicy struct {
	static
	s       *sim
	fleet   *peer.Fleet
	routers []peer.Router
	views   []peerView
	local   bool

	firstObs []peer.FirstTokenObserver // by cluster, nil when the router lacks the hook
	doneObs  []peer.CompletionObserver
	pollers  []peer.Poller
	pollNs   int64 // the shortest poll interval of the routers, 0 none
	metrics  []peer.Metrics
	polled   []uint64 // by engine: sim.changes when its metrics were read

	req      peer.Request
	deferred [][]int32       // by cluster: requests held at its router, oldest first
	backlog  *prefillBacklog // nil unless a router reads it (peer.BacklogReader)
	bad      error           // the first invalid pick, ending the run
}

func newPeerPolicy(s *sim, name string) (*peerPolicy, error) {
	pol, local, ok := peer.LookupIn(s.cfg.PeerPolicies, name)
	if !ok {
		return nil, fmt.Errorf("backtest: unknown policy %q", name)
	}
	nc := s.fi.nrows()
	p := &peerPolicy{s: s, fleet: peerFleet(s.fi), local: local,
		routers: make([]peer.Router, nc), views: make([]peerView, nc),
		firstObs: make([]peer.FirstTokenObserver, nc), doneObs: make([]peer.CompletionObserver, nc),
		pollers: make([]peer.Poller, nc), metrics: make([]peer.Metrics, len(s.fi.engines)),
		deferred: make([][]int32, nc)}
	for c, n := range s.w.rowBlocks { // the index size hint
		p.fleet.Clusters[c].Blocks = n
	}
	for c := range nc {
		r, err := pol.New(p.fleet, c, sched.HashKey(fmt.Sprintf("%d/%s/%d", s.cfg.Seed, name, c)))
		if err != nil {
			return nil, fmt.Errorf("backtest: %s: %q: %w", name, s.fi.rowName[c], err)
		}
		p.routers[c] = r
		p.views[c] = newPeerView(s, c, local)
		p.firstObs[c], _ = r.(peer.FirstTokenObserver)
		if _, ok := r.(peer.BacklogReader); ok && p.backlog == nil {
			p.backlog = newPrefillBacklog(len(s.fi.engines), s.w.len())
		}
		p.doneObs[c], _ = r.(peer.CompletionObserver)
		if pl, ok := r.(peer.Poller); ok {
			p.pollers[c] = pl
			if d := int64(pl.PollInterval()); d > 0 && (p.pollNs == 0 || d < p.pollNs) {
				p.pollNs = d
			}
		}
	}
	for c := range p.views {
		p.views[c].backlog = p.backlog
	}
	if p.firstObs[0] != nil || p.backlog != nil {
		s.enableFirstTokens(p.firstToken)
	}
	s.hooks = p
	return p, nil
}

// peerFleet is the fleet as routers are configured with it.
func peerFleet(fi *fleetInfo) *peer.Fleet {
	f := &peer.Fleet{BlockTokens: fi.f.BlockTokens, TTFTSLOMs: fi.f.TTFTSLOMs}
	for e, pr := range fi.params {
		r := max(pr.Replicas, 1)
		eng := peer.Engine{Name: fi.engines[e], Region: fi.f.Engines[e].Region,
			Slots: pr.MaxBatch * r, KVCacheTokens: pr.KVCacheTokens * r,
			PrefillTokensPerS: pr.PrefillTokensPerS * float64(r)}
		if pr.Scheduler == engine.SchedulerChunked { // what a vLLM worker reports; whole mode has no budget
			eng.MaxBatchedTokens = pr.MaxNumBatchedTokens * r
		}
		f.Engines = append(f.Engines, eng)
	}
	// One router instance per demand row: a cluster's pool for one model
	// (and prompt band), as llm-d runs one endpoint picker per pool.
	for r, rw := range fi.rows.Rows {
		f.Clusters = append(f.Clusters, peer.Cluster{Name: fi.rowName[r], Region: fi.f.Clusters[rw.Cluster].Region,
			Eligible: fi.elig[r], NetworkMs: fi.net[r]})
	}
	return f
}

// pick offers request i to its cluster's router.
func (p *peerPolicy) pick(s *sim, i int) int {
	c := int(s.w.row[i])
	if len(p.deferred[c]) > 0 { // first come, first served at the router
		p.deferred[c] = append(p.deferred[c], int32(i))
		return pickDeferred
	}
	return p.offer(c, i)
}

// offer asks cluster c's router for request i's engine.
func (p *peerPolicy) offer(c, i int) int {
	e := p.routers[c].Pick(&p.views[c], p.request(i))
	switch e {
	case peer.Shed:
		return pickShed
	case peer.NoEngine:
		return pickNoEngine
	case peer.Defer:
		p.deferred[c] = append(p.deferred[c], int32(i))
		return pickDeferred
	}
	if e < 0 || e >= len(p.s.fi.engines) || math.IsNaN(p.s.fi.net[c][e]) {
		if p.bad == nil {
			p.bad = fmt.Errorf("backtest: %s picked engine %d for request %d, which %q may not use", p.s.name, e, i, p.s.fi.rowName[c])
		}
		return pickNoEngine
	}
	if p.backlog != nil {
		w := p.s.w
		blocks := w.blocks[w.blockOff[i]:w.blockOff[i+1]]
		p.backlog.sent(i, e, int(w.prompt[i]), p.s.engines[e].CachedPrefix(blocks)*p.fleet.BlockTokens)
	}
	return e
}

func (p *peerPolicy) err() error { return p.bad }

// request fills the shared peer.Request with request i.
func (p *peerPolicy) request(i int) *peer.Request {
	w := p.s.w
	p.req = peer.Request{ID: i, Cluster: int(w.row[i]), Key: w.convHash[w.conv[i]],
		PromptTokens: int(w.prompt[i]), OutputTokens: int(w.output[i]), Blocks: w.blocks[w.blockOff[i]:w.blockOff[i+1]]}
	return &p.req
}

// firstToken and completed pass the events of a router's own requests to
// it, then offer it its deferred requests.
func (p *peerPolicy) firstToken(s *sim, i, e int) {
	c := int(s.w.row[i])
	if p.backlog != nil {
		p.backlog.out(i, e)
	}
	if o := p.firstObs[c]; o != nil {
		o.FirstToken(&p.views[c], p.request(i), e)
	}
	p.release(c)
}

func (p *peerPolicy) completed(s *sim, i, e int, failed bool) {
	c := int(s.w.row[i])
	if p.backlog != nil {
		p.backlog.out(i, e)
	}
	if o := p.doneObs[c]; o != nil {
		o.Completed(&p.views[c], p.request(i), e, failed)
	}
	p.release(c)
}

// release offers cluster c's deferred requests to its router, oldest
// first, until it defers one again.
func (p *peerPolicy) release(c int) {
	for len(p.deferred[c]) > 0 {
		i := int(p.deferred[c][0])
		e := p.offer(c, i)
		if e == pickDeferred {
			p.deferred[c] = p.deferred[c][:len(p.deferred[c])-1] // offer queued it again
			return
		}
		p.deferred[c] = p.deferred[c][1:]
		p.dispatch(i, e)
	}
}

// dispatch carries out a decision taken outside pick; the sim's only
// error is an engine refusing a valid request, a bug, kept for err.
func (p *peerPolicy) dispatch(i, e int) {
	if err := p.s.dispatch(i, e); err != nil && p.bad == nil {
		p.bad = err
	}
}

// pollInterval is when the routers poll engine metrics (0: never).
func (p *peerPolicy) pollInterval() time.Duration { return time.Duration(p.pollNs) }

// poll gives every polling router the engines' metrics now. An engine
// nothing has changed since the last poll (sim.changes) reports what it
// reported then, which is still in p.metrics: most engines, most polls.
func (p *peerPolicy) poll(s *sim) {
	if p.polled == nil {
		p.polled = make([]uint64, len(s.engines))
		for e := range p.polled {
			p.polled[e] = s.changes[e] - 1
		}
	}
	for e, eng := range s.engines {
		if p.polled[e] == s.changes[e] {
			continue
		}
		p.polled[e] = s.changes[e]
		st := eng.Status()
		p.metrics[e] = peer.Metrics{Running: st.Running, Waiting: st.Waiting, KVUsage: st.KVUtilization,
			Healthy: st.Healthy && !s.down[e]}
	}
	for c, pl := range p.pollers {
		if pl != nil {
			pl.Poll(&p.views[c], p.metrics)
		}
	}
}

// drain ends the run for requests still deferred when nothing else will
// happen: each is offered once more, and fails if its router still holds it.
func (p *peerPolicy) drain(s *sim) {
	for c := range p.deferred {
		for len(p.deferred[c]) > 0 {
			i := int(p.deferred[c][0])
			p.deferred[c] = p.deferred[c][1:]
			e := p.offer(c, i)
			if e == pickDeferred {
				p.deferred[c] = p.deferred[c][:len(p.deferred[c])-1]
				e = pickNoEngine
			}
			p.dispatch(i, e)
		}
	}
}
