package backtest

import (
	"context"
	"fmt"
	"math"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
	"github.com/ilb-router/ilb/streams/window"
)

// Results of a policy's pick besides an engine index.
const (
	pickShed     = -1 // shed by the policy (an optimizer's shed fraction)
	pickNoEngine = -2 // no eligible engine is available: fails
	pickDeferred = -3 // held by the policy, which dispatches it later
	pickRefused  = -4 // refused by the data plane's local admission
)

// Request states, by request index.
const (
	stPending uint8 = iota
	stInFlight
	stDone
)

// sim is one policy's simulation. It owns its engines and all its state;
// the workload and fleet are shared read-only.
type sim struct {
	cfg     *Config
	fi      *fleetInfo
	w       *workload
	name    string
	pol     policy
	engines []*engine.Engine
	heap    engineHeap
	now     int64

	inflight   []int32 // by engine
	inflightCE []int32 // by row*engines+engine: the demand row's own
	inflightC  []int32 // by demand row
	healthy    []bool  // as routers know it: last status, or a rejection since
	healthGen  uint64  // changes of healthy
	waitSeen   []int32 // by engine: waiting requests at the last status tick
	runSeen    []int32 // by engine: running requests at the last status tick
	statusGen  uint64  // status ticks so far
	down       []bool  // failed now (the truth)
	state      []uint8 // by request
	reqEngine  []int16 // by request
	convLast   []int16 // by conversation: the engine of its last turn, -1 none
	busyCarry  []int64 // busy time of engines before a failure reset them
	done       []engine.Done

	// changes counts, by engine, the calls that may have changed its
	// status, so that peerPolicy.poll reads only the changed ones.
	changes []uint64

	features *window.Features // nil unless the policy reads signals
	observer completionObserver
	hooks    routerHooks         // the policy's, nil when it has none
	firsts   []engine.FirstToken // scratch for first-token records, nil unless enabled
	onFirst  func(s *sim, i, e int)
	onDone   func(s *sim, i, e int) // every request that ends, nil: none
	onStatus func()                 // after every status tick, nil: none
	ev       schemas.Event
	rec      *recorder
	progress *progress
}

func newSim(cfg *Config, fi *fleetInfo, w *workload, name string) (*sim, error) {
	ne, nc := len(fi.engines), fi.nrows()
	s := &sim{
		cfg: cfg, fi: fi, w: w, name: name,
		heap:       newEngineHeap(ne),
		inflight:   make([]int32, ne),
		inflightCE: make([]int32, nc*ne),
		inflightC:  make([]int32, nc),
		healthy:    make([]bool, ne),
		down:       make([]bool, ne),
		state:      make([]uint8, w.len()),
		reqEngine:  make([]int16, w.len()),
		convLast:   make([]int16, len(w.convKey)),
		busyCarry:  make([]int64, ne),
		changes:    make([]uint64, ne),
		waitSeen:   make([]int32, ne),
		runSeen:    make([]int32, ne),
	}
	for i := range s.convLast {
		s.convLast[i] = -1
	}
	for e, p := range fi.params {
		eng, err := fi.pool.get(p)
		if err != nil {
			return nil, fmt.Errorf("backtest: engine %q: %w", fi.engines[e], err)
		}
		s.engines = append(s.engines, eng)
		s.healthy[e] = true
	}
	s.rec = newRecorder(cfg, fi, w)
	pol, err := newPolicy(name, s)
	if err != nil {
		return nil, err
	}
	s.pol = pol
	return s, nil
}

// clock is the loop's schedule: the next arrival, fault, status and
// control tick.
type clock struct {
	arrival, fault        int
	status, control, poll int64
	faults                []fault
}

// never is a time after every event.
const never = int64(math.MaxInt64)

// run simulates the whole workload: it repeatedly takes the earliest
// event (ties: engines, faults, status, control, then arrivals) until
// every request has arrived and every engine is idle.
func (s *sim) run(ctx context.Context) error {
	faults, err := s.faults()
	if err != nil {
		return err
	}
	c := clock{control: int64(s.cfg.ControlInterval), poll: never, faults: faults}
	if s.hooks != nil && s.hooks.pollInterval() > 0 {
		c.poll = 0
	}
	for steps := 0; c.arrival < s.w.len() || !s.heap.empty(); steps++ {
		if steps&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			s.progress.maybe(s.name, s.now, c.arrival, s.w.len())
		}
		if err := s.step(&c); err != nil {
			return err
		}
		if c.arrival == s.w.len() && s.heap.empty() && s.hooks != nil {
			s.hooks.drain(s) // requests still held by routers
		}
	}
	if s.hooks != nil {
		if err := s.hooks.err(); err != nil {
			return err
		}
	}
	s.rec.finish(s)
	return nil
}

// step handles the earliest event.
func (s *sim) step(c *clock) error {
	tA, tE, tF := never, never, never
	if c.arrival < s.w.len() {
		tA = s.w.arrival[c.arrival]
	}
	if !s.heap.empty() {
		_, tE = s.heap.top()
	}
	if c.fault < len(c.faults) {
		tF = c.faults[c.fault].at
	}
	t := min(tA, tE, tF, c.status, c.control, c.poll)
	s.now = t
	switch t {
	case tE:
		e, _ := s.heap.top()
		s.advance(e, t)
	case tF:
		s.applyFault(c.faults[c.fault])
		c.fault++
	case c.status:
		s.status(t)
		c.status += int64(s.cfg.StatusInterval)
	case c.control:
		s.pol.control(s)
		c.control += int64(s.cfg.ControlInterval)
	case c.poll:
		s.hooks.poll(s)
		c.poll = nextPoll(t, int64(s.hooks.pollInterval()), min(tA, tE, tF, c.status, c.control))
	default:
		c.arrival++
		return s.arrive(c.arrival - 1)
	}
	return nil
}

// nextPoll is the poll tick after the one at `at`, every `every` ns, that
// is the first not to come before the next other event (at `next`): the
// ticks before it would see what the poll at `at` saw, since nothing
// happens in between (peer.Poller), and were half of llm-d's polls. A
// tick at `next` itself is kept: an engine's event then comes before it.
// Without a next event the ticks go on one by one, as draining the
// routers' held requests at the end may start engines again.
func nextPoll(at, every, next int64) int64 {
	if next == never || next <= at+every {
		return at + every
	}
	return at + (next-at+every-1)/every*every
}

// advance runs engine e up to t and handles what finished.
func (s *sim) advance(e int, t int64) {
	eng := s.engines[e]
	s.changes[e]++
	s.done = eng.Advance(t, s.done[:0])
	if s.firsts != nil {
		s.firstTokens(e)
	}
	for i := range s.done {
		s.complete(e, &s.done[i])
	}
	next, busy := eng.NextEventTime()
	s.heap.set(e, next, busy)
}

// arrive routes request i. A request whose model (or prompt length) no
// engine of its cluster serves fails at once, as the data plane answers
// it 404 or 400 without asking a router.
func (s *sim) arrive(i int) error {
	if s.w.row[i] < 0 {
		return s.dispatch(i, pickNoEngine)
	}
	return s.dispatch(i, s.pol.pick(s, i))
}

// dispatch carries out the policy's decision e for request i.
func (s *sim) dispatch(i, e int) error {
	switch e {
	case pickDeferred:
		return nil
	case pickShed, pickRefused:
		s.rec.shed(i)
		if e == pickRefused {
			s.rec.refused++
		}
		s.state[i] = stDone
		return nil
	case pickNoEngine:
		s.rec.fail(s, i)
		s.state[i] = stDone
		return nil
	}
	return s.submit(i, e)
}

func (s *sim) submit(i, e int) error {
	w := s.w
	c, conv := int(w.row[i]), w.conv[i]
	if last := s.convLast[conv]; last >= 0 {
		s.rec.followups++
		if int(last) != e {
			s.rec.moved++
		}
	}
	s.convLast[conv] = int16(e)
	s.reqEngine[i], s.state[i] = int16(e), stInFlight
	s.inflight[e]++
	s.inflightCE[c*len(s.fi.engines)+e]++
	s.inflightC[c]++
	s.rec.routed(s, i, e)
	r := engine.Request{
		ID: uint64(i), Tag: uint64(i),
		PromptTokens: int(w.prompt[i]), OutputTokens: int(w.output[i]),
		Blocks: w.blocks[w.blockOff[i]:w.blockOff[i+1]],
	}
	// Submit fails only for a time in the engine's past or bad sizes,
	// both excluded by construction (the loop's time never goes back;
	// the readers bound the sizes): an error here is a bug.
	s.changes[e]++
	if err := s.engines[e].Submit(s.now, r); err != nil {
		return fmt.Errorf("backtest: %s: engine %q refused request %d: %w", s.name, s.fi.engines[e], i, err)
	}
	next, busy := s.engines[e].NextEventTime()
	s.heap.set(e, next, busy)
	return nil
}

// complete handles one finished (or rejected) request of engine e.
func (s *sim) complete(e int, d *engine.Done) {
	i := int(d.Tag)
	if s.state[i] != stInFlight {
		return
	}
	s.state[i] = stDone
	c := int(s.w.row[i])
	s.inflight[e]--
	s.inflightCE[c*len(s.fi.engines)+e]--
	s.inflightC[c]--
	if d.Error != "" {
		if d.Error == engine.ErrorUnhealthy {
			s.setHealthy(e, false) // passive health: the router saw the rejection
		}
		s.rec.fail(s, i)
	} else {
		s.rec.served(s, i, e, d)
	}
	if s.features != nil {
		s.signalCompletion(e, i, d)
	}
	if s.observer != nil {
		s.observer.observe(d)
	}
	if s.hooks != nil {
		s.hooks.completed(s, i, e, d.Error != "")
	}
	if s.onDone != nil {
		s.onDone(s, i, e)
	}
}

// completionObserver sees every finished request.
type completionObserver interface{ observe(d *engine.Done) }

// status is the periodic status tick: routers learn health, engines
// publish status events, and the recorder samples its series.
func (s *sim) status(t int64) {
	s.statusGen++
	for e, eng := range s.engines {
		st := eng.Status()
		s.waitSeen[e], s.runSeen[e] = int32(st.Waiting), int32(st.Running)
		s.setHealthy(e, st.Healthy && !s.down[e])
		if s.features != nil {
			s.signalStatus(e, t, st)
		}
		s.rec.sample(s, t, e, st)
	}
	if s.onStatus != nil {
		s.onStatus()
	}
}

// setHealthy records what routers know of engine e's health; healthGen
// counts the changes, so pickers know when to recompute what depends on it.
func (s *sim) setHealthy(e int, ok bool) {
	if s.healthy[e] != ok {
		s.healthy[e] = ok
		s.healthGen++
	}
}

// busyNs is engine e's compute time so far.
func (s *sim) busyNs(e int) int64 { return s.busyCarry[e] + s.engines[e].Stats().BusyNs() }
