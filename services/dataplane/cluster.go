package dataplane

import (
	"math"
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
	mix      *window       // a: requests, b: requests of new conversations
	newShare atomic.Uint64 // float64 bits: share of requests that are new

	// Hot-path counters, read by the metric callbacks.
	shed         atomic.Int64
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
}

// buildLocked returns the picker for the cluster's current state.
func (c *cluster) buildLocked(reg *registry, pp pickerParams) *picker {
	if c.snap == nil {
		return &picker{err: ErrNoSnapshot, c: c}
	}
	p := &picker{
		c: c, version: c.snap.Version, createdAt: c.snap.CreatedAt, versionHeader: []string{strconv.FormatUint(c.snap.Version, 10)},
		table: c.table, shed: c.snap.ShedFraction, stale: c.stale, spill: pp.spill,
	}
	if c.table == nil {
		return p
	}
	p.slots = make([]slot, c.table.Len())
	p.byID = make(map[uint16]int, len(p.slots))
	for i := range p.slots {
		e := reg.getLocked(c.table.Engine(i))
		s := slot{eng: e, cell: c.cellLocked(e), limit: c.snap.QueueLimits[e.name]}
		s.avail, s.why = e.availableLocked(pp.now, pp.statusTTL)
		if s.avail && pp.needURL && e.url() == "" {
			s.avail, s.why = false, reasonUnhealthy
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
	setShares(p.slots, c.table.Counts(), c.stale)
	return p
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
	if a.err != b.err || a.version != b.version || a.table != b.table ||
		a.stale != b.stale || a.shed != b.shed || len(a.slots) != len(b.slots) {
		return false
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
