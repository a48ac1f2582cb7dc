package backtest

import (
	"math"
	"slices"
	"strings"

	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// The data plane's local admission in the backtester (routing.Admit): a
// cluster's data plane sees each engine's queue as its last status
// reported it plus the requests it has sent it since.

// setLimits installs the engines' queue limits (by engine index; nil
// turns local admission off) and, the first time, their prefill limits
// (routing.PrefillLimits: the fleet's, as the snapshots carry them).
func (p *tablePicker) setLimits(limits []float64) {
	p.limits = limits
	if p.prefill == nil && limits != nil {
		p.prefill = make([]float64, len(p.s.fi.engines))
		for name, l := range routing.PrefillLimits(p.s.fi.f) {
			if e, ok := p.s.fi.engineIndex(name); ok {
				p.prefill[e] = l
			}
		}
	}
	if p.pend == nil && limits != nil {
		s := p.s
		cells := len(s.fi.clusters) * len(s.fi.engines) // by cluster*engines+engine
		p.pend, p.pendTok = make([]int32, s.w.len()), make([]int64, cells)
		p.sentAt = make([]uint64, s.w.len())
		p.endedBy = make([]int32, cells)
		p.own, p.ownAt = make([]int32, cells), make([]int32, cells)
		p.owned = make([]bool, s.w.len())
		s.enableFirstTokens(p.prefillDone)
		s.onDone = p.ended
		s.onStatus = func() { copy(p.ownAt, p.own) }
	}
}

// ended is a request's end at engine e: its prompt leaves the pending
// prefill and its cluster's own requests there (routing.Busy), and if it
// was sent since the last status it counts as ended among those (held),
// as in the data plane.
func (p *tablePicker) ended(s *sim, i, e int) {
	p.prefillDone(s, i, e)
	c := int(s.w.cluster[i])
	if p.owned[i] {
		p.owned[i] = false
		p.own[c*len(s.fi.engines)+e]--
	}
	if p.sentAt[i] == s.statusGen && p.sentGen[c] == s.statusGen {
		p.endedBy[c*len(s.fi.engines)+e]++
	}
}

// held is the requests at engine e as the data plane of demand row c's
// cluster knows them: waiting and running by the last status, plus those
// sent since and not ended (routing.Move).
func (p *tablePicker) held(c, e int) float64 {
	sent, ended := p.sentSince(c, e)
	return float64(p.s.waitSeen[e]+p.s.runSeen[e]) + float64(sent-ended)
}

// queued is engine e's queue for local admission as the data plane of
// demand row c's cluster estimates it: waiting by the last status, plus
// those sent since that have not ended (an ended request waits nowhere).
func (p *tablePicker) queued(c, e int) float64 {
	sent, ended := p.sentSince(c, e)
	return float64(p.s.waitSeen[e]) + float64(sent-ended)
}

// sentSince is what demand row c's cluster sent engine e since the last
// status, and how many of those have ended; 0, 0 when its counts are of
// an older status.
func (p *tablePicker) sentSince(c, e int) (sent, ended int32) {
	s := p.s
	c = int(s.fi.rowCluster[c])
	if p.sentGen[c] != s.statusGen {
		return 0, 0
	}
	k := c*len(s.fi.engines) + e
	if p.endedBy != nil {
		ended = p.endedBy[k]
	}
	return p.sentBy[k], ended
}

// sent counts a request of demand row c's cluster sent to engine e.
func (p *tablePicker) sent(c, e int) {
	s := p.s
	c = int(s.fi.rowCluster[c])
	ne := len(s.fi.engines)
	if p.sentGen[c] != s.statusGen {
		clear(p.sentBy[c*ne : (c+1)*ne])
		if p.endedBy != nil {
			clear(p.endedBy[c*ne : (c+1)*ne])
		}
		p.sentGen[c] = s.statusGen
	}
	p.sentBy[c*ne+e]++
}

// admits reports whether table engine idx of cluster p.c admits a
// request (ongoing: of a conversation under way), as the data plane's
// slot.admits: its queue under the queue limit, and the prompt tokens
// pending there (this cluster's, and the others' as last shared) under
// the prefill limit.
func (p *tablePicker) admits(idx int, ongoing bool) bool {
	return p.admitsEngine(int(p.toEngine[p.c][idx]), ongoing)
}

// admitsEngine is admits by engine index.
func (p *tablePicker) admitsEngine(e int, ongoing bool) bool {
	if !routing.Admit(p.queued(p.c, e), p.limits[e], ongoing) {
		return false
	}
	return routing.Admit(float64(p.pendingTokens(e, true)), p.prefill[e], ongoing)
}

// refuses is the skip of the admission spill: unusable, or over its limit.
func (p *tablePicker) refuses(idx int) bool { return !p.usable(idx) || !p.admits(idx, p.ongoing) }

// lighter is routing.SecondChoice for a new conversation of cluster p.c,
// routing.Move for an ongoing one: the load of an engine is its queue and
// batch as the data plane sees them (last status plus what it sent
// since, and the prefill it sent and has not seen answered) over its
// queue limit, which is proportional to its capacity.
func (p *tablePicker) lighter(t *sched.Table, h uint64, idx int, ongoing bool) int {
	p.ongoing = ongoing
	if ongoing {
		return routing.Move(t, h, idx, p.held(p.c, int(p.toEngine[p.c][idx])), p.closed, p.load)
	}
	return routing.SecondChoice(t, h, idx, p.closed, p.load)
}

// overflow is routing.Overflow for a new conversation of cluster p.c
// sent to table engine idx: the engine outside the table it goes to
// instead, or -1. Its candidates are the data plane's overflow slots:
// the engines the row may use and its table does not hold, in name
// order, with a queue limit; closed if unhealthy or over their
// admission limits.
func (p *tablePicker) overflow(idx int) int {
	c := p.c
	if p.outside == nil {
		p.outside = make([][]int32, len(p.s.fi.elig))
	}
	if p.outside[c] == nil {
		names := p.s.fi.engines
		p.outside[c] = slices.SortedFunc(slices.Values(p.s.fi.elig[c]), func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	}
	out, toIdx := p.outside[c], p.toIdx[c]
	if len(out) == p.tables[c].Len() {
		return -1 // every engine the row may use is in its table
	}
	o := routing.Overflow(p.load(idx), len(out),
		func(i int) bool {
			e := int(out[i])
			return toIdx[e] >= 0 || !p.s.healthy[e] || !(p.limits[e] > 0) || !p.admitsEngine(e, false)
		},
		func(i int) float64 { return p.loadEngine(int(out[i])) })
	if o < 0 {
		return -1
	}
	return int(out[o])
}

// load is the data plane's slot.load of table engine i (loadEngine).
func (p *tablePicker) load(i int) float64 { return p.loadEngine(int(p.toEngine[p.c][i])) }

// loadEngine is the data plane's slot.load: the engine's queue and batch
// as cluster p.c's data plane sees them (routing.Busy: the other
// clusters' requests by the last status, its own as they are now), plus
// the prefill pending there (its own, and while the cluster sheds nothing
// the other data planes' as shared, pendingView) in requests of its mean
// prompt, over the engine's queue limit.
func (p *tablePicker) loadEngine(e int) float64 {
	if !(p.limits[e] > 0) {
		return math.Inf(1)
	}
	k := int(p.s.fi.rowCluster[p.c])*len(p.s.fi.engines) + e
	q := routing.Busy(float64(p.s.waitSeen[e]), float64(p.s.runSeen[e]), float64(p.ownAt[k]), float64(p.own[k]))
	if p.meanPrompt > 0 {
		q += float64(p.pendingTokens(e, !(p.shed[p.c] >= routing.MinShed))) / p.meanPrompt
	}
	return q / p.limits[e]
}

// pendingTokens is the prompt tokens pending prefill at engine e as
// cluster p.c's data plane knows them (live.pendingTokens): its own, and
// with shared the other data planes' as last shared (when they share).
func (p *tablePicker) pendingTokens(e int, shared bool) int64 {
	c := int(p.s.fi.rowCluster[p.c])
	tok := p.pendTok[c*len(p.s.fi.engines)+e]
	if shared && p.syncLag > 0 {
		tok += p.othersPending(c, e)
	}
	return tok
}

// othersPending is the prefill the data planes of clusters other than c
// have pending at engine e, as cluster c's data plane knows it from
// their last shared figures (services/dataplane pending_sync.go): a copy
// of every cluster's pending prefill taken every syncLag, the publish
// interval plus the delivery between regions.
func (p *tablePicker) othersPending(c, e int) int64 {
	ne := len(p.s.fi.engines)
	if p.syncView == nil || p.s.now-p.syncAt >= int64(p.syncLag) {
		p.syncView = append(p.syncView[:0], p.pendTok...)
		if p.syncTotal == nil {
			p.syncTotal = make([]int64, ne)
		}
		clear(p.syncTotal)
		for k, tok := range p.syncView {
			p.syncTotal[k%ne] += tok
		}
		p.syncAt = p.s.now
	}
	return p.syncTotal[e] - p.syncView[c*ne+e]
}

// prefillSent counts request i's prompt as prefill this cluster's data
// plane has sent engine e and not yet seen a first token of (it sees the
// answer's stream start), in units of its mean prompt, and request i
// among its own in flight there until it ends (routing.Busy).
func (p *tablePicker) prefillSent(i, c, e int) {
	c = int(p.s.fi.rowCluster[c]) // a row's cluster
	p.sentAt[i] = p.s.statusGen
	if !p.owned[i] {
		p.owned[i] = true
		p.own[c*len(p.s.fi.engines)+e]++
	}
	tok := p.s.w.prompt[i]
	p.pend[i] = tok
	p.pendTok[c*len(p.s.fi.engines)+e] += int64(tok)
	p.meanPrompt += (float64(tok) - p.meanPrompt) * meanPromptAlpha
}

// meanPromptAlpha is the weight of each request in the mean prompt.
const meanPromptAlpha = 0.01

// prefillDone takes request i's prompt off engine e's pending prefill: at
// its first token, or when it ends without one.
func (p *tablePicker) prefillDone(s *sim, i, e int) {
	if tok := p.pend[i]; tok > 0 {
		p.pendTok[int(s.w.cluster[i])*len(s.fi.engines)+e] -= int64(tok)
		p.pend[i] = 0
	}
}
