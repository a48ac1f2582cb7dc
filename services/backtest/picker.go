package backtest

import (
	"fmt"
	"math"
	"time"

	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// conversationIdle is how long after its last turn a conversation still
// counts as ongoing, as in the data plane's default.
const conversationIdle = 30 * time.Minute

// newShareWindow is how far back the share of requests from new
// conversations is measured, as in the data plane (one minute).
const newShareWindow = time.Minute

// tablePicker routes by weighted consistent hashing with the data plane's
// guardrails (services/internal/routing, the rules the data plane runs):
// one sched.Table per demand row (a cluster's class; "cluster" below), updated with minimal churn when weights
// change; a shed fraction refuses new conversations first (routing.Shed);
// an ongoing conversation spilled earlier goes back to where it went
// while its table engine is unchanged (routing.Sticky); otherwise the
// key's table engine, or sched's next choice, skipping unhealthy engines
// and, for a new conversation with a finite spill factor, engines already
// holding their bounded load of the cluster's requests (routing.Choose,
// routing.Over, on the shares of routing.Shares).
type tablePicker struct {
	spill    float64 // 1+ε; +Inf: no spill
	tables   []*sched.Table
	up       sched.Updater  // the tables' updates' working memory
	tab      routing.Tabler // setWeights's, with the engine list
	names    []string       // set's scratch: a cluster's engines
	ws       []float64      // and their weights
	toEngine [][]int32      // [c][table index] -> engine index
	toIdx    [][]int32      // [c][engine] -> table index, -1 when not in the table
	counts   [][]int        // [c][table index]: slots
	share    [][]float64    // [c][table index]: bounded-load share
	shareGen []uint64       // [c]: sim.healthGen the shares were computed at, +1
	w        [][]float64    // [c][engine]: current weights
	shed     []float64      // by cluster

	// conversation memory: the engine the table gave the last turn, the
	// one that served it, and when.
	primary, served []int16
	lastNs          []int64

	// requests and new-conversation requests per cluster, per control
	// interval over the last newShareWindow (a ring), and their share.
	fresh, reqs [][]int
	ring        int
	newShare    []float64
	sizes       []routing.Sizes // [c]: recent new conversations' prompts, shed largest first

	c       int  // cluster being picked for, read by skip and full
	ongoing bool // whether the request being picked continues a conversation, read by closed
	s       *sim
	skip    func(idx int) bool
	full    func(idx int) bool
	closed  func(idx int) bool
	// outside[c]: the engines demand row c may use, in name order, for
	// routing.Overflow (those in its table are skipped).
	outside [][]int32

	// Local admission (routing.Admit): each engine's queue limit (nil:
	// none), and the requests each cluster sent each engine since the
	// last status it saw (sentBy[c*ne+e], valid at status generation
	// sentGen[c]).
	limits  []float64
	prefill []float64 // by engine: the prefill limits (routing.PrefillLimits), with limits
	sentBy  []int32
	sentGen []uint64
	// Prefill sent and not yet started answering (prefillSent): prompt
	// tokens by request, and by cluster*engines+engine; the mean prompt.
	pend       []int32
	sentAt     []uint64 // the status generation request i was sent in
	endedBy    []int32  // like sentBy: of those, the ones that ended
	pendTok    []int64
	meanPrompt float64
	// Each cluster's own requests in flight at each engine
	// (routing.Busy): sent and not ended (own, by cluster*engines+engine;
	// owned by request), and as they were at the last status (ownAt).
	own, ownAt []int32
	owned      []bool
	// The other data planes' pending prefill as shared (othersPending):
	// every cluster's pendTok as of syncAt, and its sum by engine;
	// syncLag 0 shares nothing.
	syncLag   time.Duration
	syncView  []int64
	syncTotal []int64
	syncAt    int64
}

func newTablePicker(s *sim, spill float64) *tablePicker {
	nc, nconv := s.fi.nrows(), len(s.w.convKey)
	slots := max(1, int((newShareWindow+s.cfg.ControlInterval-1)/s.cfg.ControlInterval))
	p := &tablePicker{
		spill: spill, s: s,
		tables: make([]*sched.Table, nc), toEngine: make([][]int32, nc), toIdx: make([][]int32, nc),
		counts: make([][]int, nc), share: make([][]float64, nc), shareGen: make([]uint64, nc),
		w: make([][]float64, nc), shed: make([]float64, nc),
		primary: make([]int16, nconv), served: make([]int16, nconv), lastNs: make([]int64, nconv),
		fresh: make([][]int, slots), reqs: make([][]int, slots), newShare: make([]float64, nc),
		sizes: make([]routing.Sizes, nc),
	}
	for i := range p.primary {
		p.primary[i], p.served[i] = -1, -1
	}
	for k := range p.fresh {
		p.fresh[k], p.reqs[k] = make([]int, nc), make([]int, nc)
	}
	for c := range p.newShare {
		p.newShare[c] = 1 // as the data plane before any request
	}
	p.skip = p.unusable
	p.full = p.over
	p.closed = p.refuses
	p.sentBy = make([]int32, len(s.fi.clusters)*len(s.fi.engines)) // by cluster: what its data plane sent
	p.sentGen = make([]uint64, len(s.fi.clusters))
	return p
}

// set installs cluster c's weights (by engine index, eligible engines
// only) and shed fraction, updating its table over the cluster's eligible
// engines in fleet order: the legacy and static policies' tables.
func (p *tablePicker) set(c int, w []float64, shed float64) error {
	s := p.s
	el := s.fi.elig[c]
	names, ws := p.names[:0], p.ws[:0]
	total := 0.0
	for _, e := range el {
		names, ws = append(names, s.fi.engines[e]), append(ws, w[e])
		total += w[e]
	}
	p.names, p.ws = names, ws
	var t *sched.Table
	if total > 0 {
		prev := p.tables[c]
		if prev != nil {
			prev = prev.Compact() // install keeps the update compact: skip the slot copy
		}
		var err error
		if t, err = p.up.Rebalance(prev, names, ws); err != nil {
			return fmt.Errorf("backtest: %q table: %w", s.fi.rowName[c], err)
		}
	}
	p.install(c, t, w, shed)
	return nil
}

// setWeights installs cluster c's published weights (by engine name) and
// shed fraction, with the table the optimizer service publishes for them
// (routing.Table: engines with weight, in name order, minimal churn).
func (p *tablePicker) setWeights(c int, weights map[string]float64, shed float64) error {
	s := p.s
	prev := p.tables[c]
	if prev != nil {
		// Updated from its compact form (install keeps updated tables
		// compact): an update of the first, full table would copy its
		// 65,536 slots once more before install dropped them.
		prev = prev.Compact()
	}
	t, err := p.tab.Table(prev, weights)
	if err != nil {
		return fmt.Errorf("backtest: %q table: %w", s.fi.rowName[c], err)
	}
	w := make([]float64, len(s.fi.engines))
	for name, v := range weights {
		if e, ok := s.fi.engineIndex(name); ok {
			w[e] = v
		}
	}
	p.install(c, t, w, shed)
	return nil
}

// install makes t cluster c's table (nil: everything is shed). It
// records the weight change for weight_churn unless it is the first.
func (p *tablePicker) install(c int, t *sched.Table, w []float64, shed float64) {
	s := p.s
	if p.w[c] != nil {
		s.rec.weightUpdate(p.w[c], w, s.now)
	}
	p.w[c], p.shed[c] = w, shed
	if t == nil {
		p.tables[c] = nil
		return
	}
	if p.tables[c] != nil {
		// A table that gets updated is kept compact (runs, no slot
		// array): it picks as the full one does, and updating it every
		// control tick costs its runs, not a copy of 65,536 slots.
		t = t.Compact()
	}
	p.tables[c] = t
	p.toEngine[c] = p.toEngine[c][:0]
	if p.toIdx[c] == nil {
		p.toIdx[c] = make([]int32, len(s.fi.engines))
	}
	for e := range p.toIdx[c] {
		p.toIdx[c][e] = -1
	}
	for idx := range t.Len() {
		e, _ := s.fi.engineIndex(t.Engine(idx))
		p.toEngine[c] = append(p.toEngine[c], int32(e))
		p.toIdx[c][e] = int32(idx)
	}
	p.counts[c] = t.Counts()
	p.share[c] = make([]float64, t.Len())
	p.shareGen[c] = 0 // recomputed at the next pick
}

func (p *tablePicker) weights(c int) []float64 { return p.w[c] }

// pick routes request i.
func (p *tablePicker) pick(s *sim, i int) int {
	c, conv := int(s.w.row[i]), s.w.conv[i]
	h := s.w.convHash[conv]
	ongoing := p.primary[conv] >= 0 && s.now-p.lastNs[conv] <= int64(conversationIdle)
	p.reqs[p.ring][c]++
	if !ongoing {
		p.fresh[p.ring][c]++
	}
	t := p.tables[c]
	if routing.ShedNoting(h, p.shed[c], p.newShare[c], ongoing, &p.sizes[c], int(s.w.prompt[i])) || t == nil {
		return pickShed
	}
	p.c, p.s = c, s
	if p.shareGen[c] != s.healthGen+1 {
		routing.Shares(p.share[c], p.counts[c], p.usable)
		p.shareGen[c] = s.healthGen + 1
	}
	primaryIdx := t.PickHash(h)
	primary := int(p.toEngine[c][primaryIdx])
	if ongoing && routing.Sticky(int(p.primary[conv]), int(p.served[conv]), primary) {
		// Its spill target: a table engine with a share, or an engine
		// outside the table that routing.Overflow sent it to.
		if sv := int(p.served[conv]); p.toIdx[c][sv] >= 0 && p.share[c][p.toIdx[c][sv]] > 0 &&
			(p.limits == nil || p.admits(int(p.toIdx[c][sv]), true)) ||
			p.toIdx[c][sv] < 0 && p.limits != nil && s.healthy[sv] && p.admitsEngine(sv, true) {
			p.remember(conv, primary, sv)
			p.sent(c, sv)
			if p.pend != nil {
				p.prefillSent(i, c, sv)
			}
			return sv
		}
	}
	idx, ok := routing.Choose(t, h, ongoing, p.skip, p.full)
	if !ok {
		return pickNoEngine
	}
	if p.limits != nil && !p.admits(idx, ongoing) {
		// Local admission: the engine cannot start it within the SLO;
		// the first in the key's probe order that can, else refuse.
		p.ongoing = ongoing
		if idx, ok = t.PickSkip(h, p.closed); !ok {
			return pickRefused
		}
	}
	e := -1
	if p.limits != nil {
		idx = p.lighter(t, h, idx, ongoing)
		if !ongoing {
			e = p.overflow(idx)
		}
	}
	if e < 0 {
		e = int(p.toEngine[c][idx])
	}
	p.sent(c, e)
	if p.pend != nil {
		p.prefillSent(i, c, e)
	}
	chosen := idx
	if e != int(p.toEngine[c][idx]) {
		chosen = -1 // routing.Overflow's engine: outside the table, not the primary
	}
	if routing.Spilled(chosen, primaryIdx, s.healthy[primary]) {
		p.remember(conv, primary, e) // a spill is remembered
	} else {
		p.remember(conv, primary, primary) // back to it once it recovers
	}
	return e
}

func (p *tablePicker) remember(conv int32, primary, served int) {
	p.primary[conv], p.served[conv], p.lastNs[conv] = int16(primary), int16(served), p.s.now
}

// usable reports whether table engine idx of cluster p.c may take requests.
func (p *tablePicker) usable(idx int) bool { return p.s.healthy[p.toEngine[p.c][idx]] }

// unusable is routing.Choose's skip for cluster p.c.
func (p *tablePicker) unusable(idx int) bool { return !p.usable(idx) }

// over is routing.Choose's full for cluster p.c: the engine holds its
// bounded load of the cluster's requests in flight.
func (p *tablePicker) over(idx int) bool {
	s, c := p.s, p.c
	e := int(p.toEngine[c][idx])
	return routing.Over(p.spill, p.share[c][idx], int64(s.inflightCE[c*len(s.fi.engines)+e]), int64(s.inflightC[c]))
}

// rollShares updates each cluster's new-conversation share from the
// requests of the last newShareWindow, and starts the next interval.
func (p *tablePicker) rollShares() {
	for c := range p.newShare {
		reqs, fresh := 0, 0
		for k := range p.reqs {
			reqs += p.reqs[k][c]
			fresh += p.fresh[k][c]
		}
		if reqs > 0 {
			p.newShare[c] = float64(fresh) / float64(reqs)
		}
	}
	p.ring = (p.ring + 1) % len(p.reqs)
	clear(p.reqs[p.ring])
	clear(p.fresh[p.ring])
}

// hashPolicy is pure conversation affinity: each cluster's table is built
// once with capacity-proportional weights over its eligible engines and
// never updated; an unhealthy engine's keys go to their next choice.
type hashPolicy struct {
	static
	*tablePicker
}

func newHashPolicy(s *sim) (*hashPolicy, error) {
	p := &hashPolicy{tablePicker: newTablePicker(s, math.Inf(1))}
	caps := nominalCapacities(s.fi)
	for c := range s.fi.nrows() {
		w := make([]float64, len(s.fi.engines))
		for _, e := range s.fi.elig[c] {
			w[e] = caps[e]
		}
		if err := p.set(c, w, 0); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// weights is nil: hash's weights never change, so it has no series.
func (p *hashPolicy) weights(int) []float64 { return nil }

func (p *hashPolicy) pick(s *sim, i int) int { return p.tablePicker.pick(s, i) }
