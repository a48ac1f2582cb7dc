package dataplane

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// Errors a pick can return; the HTTP layer maps them to status codes.
var (
	// ErrNoSnapshot: the cluster has had no valid snapshot yet (503).
	ErrNoSnapshot = errors.New("no snapshot yet")
	// ErrNoEngine: every engine of the snapshot is unavailable (503).
	ErrNoEngine = errors.New("no available engine")
	// ErrShed: the request is shed by the snapshot's shed fraction (429).
	ErrShed = errors.New("shed")
)

// fallback says why a request went to another engine than its table
// choice. Its String is the reason label of ilb_dataplane_fallbacks_total.
type fallback uint8

// Fallback reasons.
const (
	noFallback       fallback = iota
	reasonUnhealthy           // unhealthy, no ready replica, failed probes, or no URL
	reasonSpill               // bounded-load spill of a new conversation, or routing.Overflow
	reasonOutlier             // ejected, or latency-penalised for new conversations
	reasonStale               // picked under the stale policy (counted in addition)
	reasonIneligible          // the snapshot gives it the class, the fleet says it does not serve it
)

var fallbackNames = [...]string{"", "unhealthy", "spill", "outlier", "stale", "ineligible"}

func (f fallback) String() string { return fallbackNames[f] }

// cell is one (cluster, engine) pair's hot-path counters. Cells live as
// long as the process, so in-flight counts survive picker rebuilds.
type cell struct {
	eng      *engine
	inflight atomic.Int64
	picks    atomic.Int64
}

// slot is what a picker knows about the engine at one table index.
type slot struct {
	eng     *engine
	cell    *cell
	avail   bool
	why     fallback // reason it is unavailable
	share   float64  // bounded-load share, over available engines with slots
	penalty uint64   // keys with penaltyHash(h) < penalty leave it (new conversations)
	limit   float64  // local admission queue limit from the snapshot; 0: none
	prefill float64  // local admission prefill limit (prompt tokens) from the snapshot; 0: none
}

// picker is an immutable routing state for one cluster. The zero-snapshot
// picker has err set and nothing else.
type picker struct {
	err     error
	c       *cluster
	version uint64
	// versionHeader is the X-Ilb-Snapshot-Version value, built once.
	versionHeader []string
	createdAt     time.Time
	table         *sched.Table // nil when the snapshot sheds everything
	slots         []slot       // by table index, then the overflow slots outside it (appendOutside)
	byID          map[uint16]int
	shed          float64
	stale         bool
	spill         float64 // 1+ε
	cat           *catalog
	// sub are the pickers of the request classes, by catalogue class;
	// nil when this picker routes every request (models.go).
	sub []*picker
}

// forRequest returns the picker of the class of a request for model with
// a prompt of about tokens, or the model error (schemas.ErrUnknownModel,
// schemas.ErrContextLength). Without a snapshot it returns p, whose pick
// fails with ErrNoSnapshot. It allocates only for an error.
func (p *picker) forRequest(model string, tokens int) (*picker, error) {
	if p.err != nil {
		return p, nil
	}
	k, err := p.cat.classify(model, tokens)
	if err != nil {
		return nil, err
	}
	if p.sub == nil {
		return p, nil
	}
	return p.sub[k], nil
}

// choice is the outcome of a pick.
type choice struct {
	idx     int // slot index of the chosen engine: the table's, or an overflow slot's
	primary int // table index the key's own slot names
	reason  fallback
	memo    memo // what to remember about the conversation
}

// tried lists the table indices a request already failed on, and those
// it may not use at all.
type tried struct {
	idx [12]int
	n   int
	// deny, by table index, are engines outside the subset a proxy allows
	// (the endpoint picker's subset hint); nil allows every engine.
	deny []bool
}

func (t *tried) has(i int) bool {
	if t.deny != nil && t.deny[i] {
		return true
	}
	for _, j := range t.idx[:t.n] {
		if j == i {
			return true
		}
	}
	return false
}

func (t *tried) add(i int) {
	if t.n < len(t.idx) {
		t.idx[t.n] = i
		t.n++
	}
}

// pick chooses the engine for the key with hash h. ongoing says whether
// the conversation was seen recently (m is then its memo); total is the
// cluster's in-flight count. Ongoing conversations go to their table
// choice, or back to the engine a spill sent them to, unless it is
// unavailable; new ones also avoid penalised and overloaded engines. The
// next choice is sched's deterministic probe sequence. pick does not
// allocate.
func (p *picker) pick(h uint64, ongoing bool, m memo, tr *tried) (choice, error) {
	if p.err != nil {
		return choice{}, p.err
	}
	if p.table == nil {
		return choice{}, ErrNoEngine
	}
	primary := p.table.PickHash(h)
	if ongoing && tr.n == 0 {
		if idx, ok := p.sticky(primary, m); ok && !tr.has(idx) {
			// Counted when it spilled, not again on every later turn.
			return choice{idx: idx, primary: primary, memo: m}, nil
		}
	}
	total := p.c.inflight.Load()
	idx, ok := routing.Choose(p.table, h, ongoing,
		func(i int) bool { return !p.slots[i].avail || tr.has(i) },
		func(i int) bool { s := &p.slots[i]; return penalised(s, h) || p.over(s, total) })
	if !ok {
		return choice{}, ErrNoEngine
	}
	closed := func(i int) bool { return !p.slots[i].avail || tr.has(i) || !p.slots[i].admits(ongoing) }
	// New conversations take the lightest of the candidates; ongoing
	// ones leave their engine only for one under half its load.
	mean, shared := p.loadArgs()
	load := func(i int) float64 { return p.slots[i].load(mean, shared) }
	if !p.stale {
		if ongoing {
			idx = routing.Move(p.table, h, idx, p.slots[idx].eng.live.held(), closed, load)
		} else {
			idx = routing.SecondChoice(p.table, h, idx, closed, load)
		}
	}
	if !p.slots[idx].admits(ongoing) {
		// Local admission: the first engine in the key's probe order that
		// can start it within the SLO, else refuse.
		if idx, ok = p.table.PickSkip(h, closed); !ok {
			return choice{}, ErrAdmission
		}
	}
	if n := p.table.Len(); !ongoing && !p.stale && len(p.slots) > n {
		// A new conversation whose table engine is loaded goes to an
		// idle engine outside the table (routing.Overflow).
		out := p.slots[n:]
		if o := routing.Overflow(load(idx), len(out),
			func(i int) bool { s := &out[i]; return !s.avail || s.penalty != 0 || tr.has(n+i) || !s.admits(false) },
			func(i int) float64 { return out[i].load(mean, shared) }); o >= 0 {
			idx = n + o
		}
	}
	return p.result(h, idx, primary, ongoing, tr), nil
}

// loadArgs is what slot.load takes besides the slot, as the choice
// among candidates compares engines: the cluster's mean prompt, and
// whether the other data planes' pending prefill counts (while the
// cluster sheds nothing: when the fleet is short, steering by everyone's
// backlog only moves the shortfall around: services/backtest README,
// "Pending prefill"). GET /v1/routing shows the same loads. (A method
// returning the load as a closure allocated on the pick path under the
// race detector: TestPickPathDoesNotAllocate.)
func (p *picker) loadArgs() (mean float64, shared bool) {
	return p.c.meanPrompt(), !(p.shed >= routing.MinShed)
}

// sticky returns the engine a spill sent this conversation to, if the
// table still gives the key the same primary engine and the spill target
// is available and has slots.
func (p *picker) sticky(primary int, m memo) (int, bool) {
	if m.served == 0 || !routing.Sticky(int(m.primary), int(m.served), int(p.slots[primary].eng.id)) {
		return 0, false
	}
	idx, ok := p.byID[m.served]
	if !ok || !p.slots[idx].avail {
		return 0, false
	}
	if idx >= p.table.Len() {
		// Outside the table (routing.Overflow sent it there): while it
		// can start the turn within the SLO.
		return idx, p.slots[idx].admits(true)
	}
	return idx, p.slots[idx].share != 0
}

func (p *picker) result(h uint64, idx, primary int, ongoing bool, tr *tried) choice {
	c := choice{idx: idx, primary: primary}
	c.memo = memo{primary: p.slots[primary].eng.id, served: p.slots[primary].eng.id}
	ps := &p.slots[primary]
	usable := ps.avail && !tr.has(primary) && (ongoing || !penalised(ps, h))
	switch {
	case routing.Spilled(idx, primary, usable):
		c.reason = reasonSpill
		c.memo.served = p.slots[idx].eng.id
	case idx == primary:
	case !ps.avail:
		c.reason = ps.why
	case tr.has(primary):
		// A retry: counted as a retry, not as a fallback.
	default: // a new conversation away from a latency-penalised primary
		c.reason = reasonOutlier
	}
	return c
}

// over reports whether the engine already holds its bounded load of this
// cluster's in-flight requests (routing.Over).
func (p *picker) over(s *slot, total int64) bool {
	return routing.Over(p.spill, s.share, s.cell.inflight.Load(), total)
}

// penaltySalt separates the latency-penalty hash from the table and
// shedding hashes.
const penaltySalt = 0x6a09e667f3bcc909

func penalised(s *slot, h uint64) bool {
	return s.penalty != 0 && mix64(h^penaltySalt)>>11 < s.penalty
}

// penaltyThreshold turns a share of keys into a threshold on a 53-bit hash.
func penaltyThreshold(share float64) uint64 {
	return uint64(share * (1 << 53))
}

// mix64 is the splitmix64 finaliser.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// shedKey reports whether the request with hash h and a prompt of tokens
// (estimated; 0 unknown) is shed: routing.ShedNoting, new conversations
// first, the largest of them first unless sizes is nil, the rule the
// backtester runs too. Stale pickers shed nothing (README.md, Staleness);
// new conversations' prompts are remembered either way.
func (p *picker) shedKey(h uint64, ongoing bool, newShare float64, sizes *routing.Sizes, tokens int) bool {
	f := p.shed
	if p.stale {
		f = 0
	}
	return routing.ShedNoting(h, f, newShare, ongoing, sizes, tokens)
}
