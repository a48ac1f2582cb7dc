package backtest

import (
	"fmt"
	"math"
	"time"

	"github.com/ilb-router/ilb/solver/sched"
)

// conversationIdle is how long after its last turn a conversation still
// counts as ongoing, as in the data plane's default.
const conversationIdle = 30 * time.Minute

// tablePicker routes by weighted consistent hashing with the data plane's
// guardrails: one sched.Table per cluster over its eligible engines,
// updated with minimal churn when weights change; unhealthy engines are
// skipped by sched's next choice; with a finite spill factor, a new
// conversation avoids an engine already holding spill × its share of the
// cluster's requests in flight (bounded loads); an ongoing conversation
// spilled earlier stays where it went while its table engine is unchanged;
// a shed fraction refuses new conversations first (sched.ShedKey).
type tablePicker struct {
	spill    float64 // 1+ε; +Inf: no spill
	tables   []*sched.Table
	toEngine [][]int32   // [c][table index] -> engine index
	share    [][]float64 // [c][table index]: share of the table's slots
	w        [][]float64 // [c][engine]: current weights
	shed     []float64   // by cluster

	// conversation memory: the engine the table gave the last turn, the
	// one that served it, and when.
	primary, served []int16
	lastNs          []int64

	// new-conversation share per cluster over the last control interval.
	fresh, reqs []int
	newShare    []float64

	c    int // cluster being picked for, read by skip
	s    *sim
	over bool // whether skip applies the load bound
	skip func(idx int) bool
}

func newTablePicker(s *sim, spill float64) *tablePicker {
	nc, nconv := len(s.fi.clusters), len(s.w.convKey)
	p := &tablePicker{
		spill: spill, s: s,
		tables: make([]*sched.Table, nc), toEngine: make([][]int32, nc), share: make([][]float64, nc),
		w: make([][]float64, nc), shed: make([]float64, nc),
		primary: make([]int16, nconv), served: make([]int16, nconv), lastNs: make([]int64, nconv),
		fresh: make([]int, nc), reqs: make([]int, nc), newShare: make([]float64, nc),
	}
	for i := range p.primary {
		p.primary[i], p.served[i] = -1, -1
	}
	for c := range p.newShare {
		p.newShare[c] = 1
	}
	p.skip = p.skipEngine
	return p
}

// set installs cluster c's weights (by engine index, eligible engines
// only) and shed fraction, updating its table from the previous one. It
// records the weight change for weight_churn unless it is the first.
func (p *tablePicker) set(c int, w []float64, shed float64) error {
	s := p.s
	el := s.fi.elig[c]
	names := make([]string, len(el))
	ws := make([]float64, len(el))
	total := 0.0
	for k, e := range el {
		names[k], ws[k] = s.fi.engines[e], w[e]
		total += w[e]
	}
	if p.w[c] != nil {
		s.rec.weightUpdate(p.w[c], w)
	}
	p.w[c], p.shed[c] = w, shed
	if !(total > 0) {
		p.tables[c] = nil // everything shed
		return nil
	}
	t, err := sched.Rebalance(p.tables[c], names, ws)
	if err != nil {
		return fmt.Errorf("backtest: cluster %q table: %w", s.fi.clusters[c], err)
	}
	p.tables[c] = t
	p.toEngine[c] = p.toEngine[c][:0]
	for idx := range t.Len() {
		e, _ := s.fi.engineIndex(t.Engine(idx))
		p.toEngine[c] = append(p.toEngine[c], int32(e))
	}
	p.share[c] = t.Weights()
	return nil
}

func (p *tablePicker) weights(c int) []float64 { return p.w[c] }

// pick routes request i.
func (p *tablePicker) pick(s *sim, i int) int {
	c, conv := int(s.w.cluster[i]), s.w.conv[i]
	h := s.w.convHash[conv]
	ongoing := p.primary[conv] >= 0 && s.now-p.lastNs[conv] <= int64(conversationIdle)
	p.reqs[c]++
	if !ongoing {
		p.fresh[c]++
	}
	t := p.tables[c]
	if t == nil || p.shedKey(c, h, ongoing) {
		return pickShed
	}
	p.c, p.s = c, s
	primary := int(p.toEngine[c][t.PickHash(h)])
	if ongoing && int(p.primary[conv]) == primary {
		if sv := int(p.served[conv]); sv != primary && s.healthy[sv] && p.w[c][sv] > 0 {
			p.remember(conv, primary, sv)
			return sv
		}
	}
	p.over = !ongoing && !math.IsInf(p.spill, 1)
	idx, ok := t.PickSkip(h, p.skip)
	if !ok && p.over {
		p.over = false
		idx, ok = t.PickSkip(h, p.skip)
	}
	if !ok {
		return pickNoEngine
	}
	e := int(p.toEngine[c][idx])
	if e != primary && !s.healthy[primary] {
		p.remember(conv, primary, primary) // back to it once it recovers
	} else {
		p.remember(conv, primary, e) // a spill is remembered
	}
	return e
}

func (p *tablePicker) remember(conv int32, primary, served int) {
	p.primary[conv], p.served[conv], p.lastNs[conv] = int16(primary), int16(served), p.s.now
}

// skipEngine is PickSkip's skip for cluster p.c.
func (p *tablePicker) skipEngine(idx int) bool {
	s, c := p.s, p.c
	e := p.toEngine[c][idx]
	if !s.healthy[e] {
		return true
	}
	if !p.over {
		return false
	}
	// Bounded load: at least ⌈spill × share × (in flight + 1)⌉ of the
	// cluster's requests already on this engine.
	bound := math.Ceil(p.spill * p.share[c][idx] * float64(s.inflightC[c]+1))
	return float64(s.inflightCE[c*len(s.fi.engines)+int(e)]) >= bound
}

// minShed is the smallest shed fraction acted on: solvers return
// round-off (1e-16) where they mean zero.
const minShed = 1e-6

// shedKey applies the shed fraction to new conversations first, as the
// data plane does: with a share n of requests from new conversations, new
// ones are shed at f/n and ongoing ones at (f−n)/(1−n) when f > n. When no
// new conversation was seen lately (n = 0), a new one is shed at f (the
// data plane sheds every new one then).
func (p *tablePicker) shedKey(c int, h uint64, ongoing bool) bool {
	f := p.shed[c]
	if !(f >= minShed) {
		return false
	}
	if f >= 1 {
		return true
	}
	n := min(max(p.newShare[c], 0), 1)
	switch {
	case !ongoing && n == 0:
		return sched.ShedKey(h, f)
	case !ongoing:
		return sched.ShedKey(h, f/n)
	}
	return f > n && sched.ShedKey(h, (f-n)/(1-n))
}

// rollShares updates each cluster's new-conversation share from the
// requests since the last call.
func (p *tablePicker) rollShares() {
	for c := range p.reqs {
		if p.reqs[c] > 0 {
			p.newShare[c] = float64(p.fresh[c]) / float64(p.reqs[c])
		}
		p.fresh[c], p.reqs[c] = 0, 0
	}
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
	for c := range s.fi.clusters {
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
