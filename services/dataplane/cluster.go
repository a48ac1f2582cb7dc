package dataplane

import (
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/affinity"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// cluster is one front-end cluster's routing state.
type cluster struct {
	name string

	// Read on the request path without a lock.
	cur      atomic.Pointer[picker] // never nil after New
	convos   *convos
	inflight atomic.Int64 // proxied requests in flight, all engines
	budget   *retryBudget
	throttle *throttle
	mix      *window        // a: requests, b: requests of new conversations
	newShare atomic.Uint64  // float64 bits: share of requests that are new
	sizes    *routing.Sizes // recent new conversations' prompts; nil: shed by key (Config.ShedOrder)

	// skipped is how many entries of the snapshot in use are ineligible
	// under the fleet in use (guarded by DataPlane.mu): a fleet reload
	// counts only entries it newly finds ineligible.
	skipped int

	// Hot-path counters, read by the metric callbacks.
	shed         atomic.Int64
	ineligible   atomic.Int64  // snapshot weight entries naming an engine that does not serve their class
	refused      atomic.Int64  // by local admission
	promptMean   atomic.Uint64 // float64 bits: moving mean of estimated prompt tokens
	throttled    atomic.Int64
	unreplayable atomic.Int64                        // failed attempts not retried: body streamed
	fallbacks    [len(fallbackNames)]atomic.Int64    // by fallback reason
	codes        [600]atomic.Int64                   // requests by HTTP status code
	keySources   [len(affinity.Sources)]atomic.Int64 // picks by affinity key source

	// Guarded by DataPlane.mu.
	snap   *schemas.Snapshot
	source string // where snap came from: sourceKV, sourceFile or sourceAPI
	digest [32]byte
	table  *sched.Table
	routes []classRoute // by catalogue class; nil: the top-level table routes every request (models.go)
	cells  map[string]*cell
	stale  bool
}

func newCluster(name string, cfg Config) *cluster {
	c := &cluster{
		name:     name,
		convos:   newConvos(cfg.ConversationSlots),
		budget:   newRetryBudget(cfg.Retry, cfg.TickInterval),
		throttle: newThrottle(cfg.Throttle, cfg.TickInterval),
		mix:      newWindow(time.Minute, cfg.TickInterval),
		cells:    map[string]*cell{},
	}
	if cfg.ShedOrder != ShedByKey {
		c.sizes = new(routing.Sizes)
	}
	c.newShare.Store(math.Float64bits(1))
	c.cur.Store(&picker{err: ErrNoSnapshot, c: c})
	return c
}

func (c *cluster) cellLocked(e *engine) *cell {
	if x, ok := c.cells[e.name]; ok {
		return x
	}
	x := &cell{eng: e}
	c.cells[e.name] = x
	return x
}

// promptAlpha is the weight of each request in the moving mean prompt.
const promptAlpha = 0.01

// observePrompt folds a request's estimated prompt tokens into the mean.
// Concurrent updates may drop one another's: it is an estimate.
func (c *cluster) observePrompt(tokens int64) {
	m := math.Float64frombits(c.promptMean.Load())
	if m == 0 {
		m = float64(tokens)
	}
	c.promptMean.Store(math.Float64bits(m + (float64(tokens)-m)*promptAlpha))
}

func (c *cluster) meanPrompt() float64 { return math.Float64frombits(c.promptMean.Load()) }

// countCode counts one answered request by status code.
func (c *cluster) countCode(code int) {
	if code >= 100 && code < len(c.codes) {
		c.codes[code].Add(1)
	}
}

// share of requests from new conversations over the last minute; 1
// before any request.
func (c *cluster) newConversationShare() float64 {
	return math.Float64frombits(c.newShare.Load())
}

// advanceLocked moves the cluster's windows on by one tick.
func (c *cluster) advanceLocked(cfg Config, utilisation float64) {
	c.budget.w.advanceLocked()
	c.budget.setUtilisation(cfg.Retry, utilisation)
	c.throttle.w.advanceLocked()
	c.mix.advanceLocked()
	if reqs, fresh := c.mix.counts(); reqs > 0 {
		c.newShare.Store(math.Float64bits(float64(fresh) / float64(reqs)))
	}
}

// pickerParams are the process-wide inputs of a picker build.
type pickerParams struct {
	now       time.Time
	statusTTL time.Duration
	needURL   bool // engines without a URL are unavailable
	spill     float64
	penalty   float64
	cat       *catalog
}

// buildLocked returns the picker for the cluster's current state: the
// top-level table's, and one per request class when the cluster has
// class routes.
func (c *cluster) buildLocked(reg *registry, pp pickerParams) *picker {
	if c.snap == nil {
		return &picker{err: ErrNoSnapshot, c: c}
	}
	if c.routes == nil {
		return c.buildTableLocked(reg, pp, c.table, c.snap.ShedFraction, 0)
	}
	p := c.buildTableLocked(reg, pp, c.table, c.snap.ShedFraction, -1)
	p.sub = make([]*picker, len(c.routes))
	for k, r := range c.routes {
		p.sub[k] = c.buildTableLocked(reg, pp, r.table, r.shed, k)
	}
	return p
}

// buildTableLocked returns a picker over table t with shed fraction shed.
// Engines that do not serve class (per the catalogue; -1: no check) are
// unavailable in it.
func (c *cluster) buildTableLocked(reg *registry, pp pickerParams, t *sched.Table, shed float64, class int) *picker {
	p := &picker{
		c: c, version: c.snap.Version, createdAt: c.snap.CreatedAt, versionHeader: []string{strconv.FormatUint(c.snap.Version, 10)},
		table: t, shed: shed, stale: c.stale, spill: pp.spill, cat: pp.cat,
	}
	if t == nil {
		return p
	}
	names := make([]string, t.Len(), t.Len()+len(c.snap.QueueLimits))
	for i := range names {
		names[i] = t.Engine(i)
	}
	if class >= 0 || c.routes == nil {
		names = appendOutside(names, c.snap.QueueLimits)
	}
	p.slots = make([]slot, len(names))
	p.byID = make(map[uint16]int, len(p.slots))
	for i, name := range names {
		e := reg.getLocked(name)
		s := slot{eng: e, cell: c.cellLocked(e), limit: c.snap.QueueLimits[e.name], prefill: c.snap.PrefillLimits[e.name]}
		s.avail, s.why = e.availableLocked(pp.now, pp.statusTTL)
		if s.avail && pp.needURL && e.url() == "" {
			s.avail, s.why = false, reasonUnhealthy
		}
		if class >= 0 && !pp.cat.serve(e.name, class) {
			s.avail, s.why = false, reasonIneligible
		}
		if e.latencyOut {
			s.penalty = penaltyThreshold(pp.penalty)
		}
		if e.draining() {
			s.penalty = penaltyThreshold(1) // every new conversation leaves it
		}
		p.slots[i] = s
		if e.id != 0 {
			p.byID[e.id] = i
		}
	}
	setShares(p.slots[:t.Len()], t.Counts(), c.stale)
	return p
}

// appendOutside appends to the table's engines (names) the others the
// cluster may use, in name order: those the snapshot gives a queue limit
// (the limits of the engines its rows may use, optimizer clusterLimits)
// that the table does not hold. They are the picker's overflow slots
// (routing.Overflow), after the table's, with no share.
func appendOutside(names []string, limits map[string]float64) []string {
	n := len(names)
	for name, l := range limits {
		if l > 0 && !slices.Contains(names[:n], name) {
			names = append(names, name)
		}
	}
	slices.Sort(names[n:])
	return names
}

// setShares sets each available engine's bounded-load share with
// routing.Shares (its slot share renormalised over available engines with
// slots) or, under the stale policy, routing.EqualShares (an equal share
// of them, so the spill balances live in-flight counts instead of
// trusting old weights): the rule the backtester runs too.
func setShares(slots []slot, counts []int, equal bool) {
	shares := make([]float64, len(slots))
	avail := func(i int) bool { return slots[i].avail }
	if equal {
		routing.EqualShares(shares, counts, avail)
	} else {
		routing.Shares(shares, counts, avail)
	}
	for i := range slots {
		slots[i].share = shares[i]
	}
}

// sameRouting reports whether two pickers route alike, so a rebuild that
// changes nothing need not be swapped in.
func sameRouting(a, b *picker) bool {
	if a.err != b.err || a.version != b.version || a.table != b.table || a.cat != b.cat ||
		a.stale != b.stale || a.shed != b.shed || len(a.slots) != len(b.slots) || len(a.sub) != len(b.sub) {
		return false
	}
	for k := range a.sub {
		if !sameRouting(a.sub[k], b.sub[k]) {
			return false
		}
	}
	for i := range a.slots {
		x, y := a.slots[i], b.slots[i]
		if x.eng != y.eng || x.avail != y.avail || x.why != y.why || x.share != y.share || x.penalty != y.penalty ||
			x.limit != y.limit {
			return false
		}
	}
	return true
}
