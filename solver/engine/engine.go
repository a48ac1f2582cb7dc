package engine

import (
	"errors"
	"fmt"
)

// Request is one inference request offered to an engine.
type Request struct {
	ID           uint64
	PromptTokens int // >= 0
	OutputTokens int // >= 1; the first comes from prefill
	// Blocks are the hashes of the prompt's prefix blocks, in order, each
	// covering BlockTokens tokens (Mooncake's hash_ids). May be empty. The
	// engine copies them, so the caller may reuse the slice.
	Blocks []uint64
	// Tag is the caller's, returned untouched in Done (an index into the
	// caller's own table, say).
	Tag uint64
}

// Done is a finished request. Times are virtual nanoseconds. For a request
// that failed (Error set), FirstTokenNs and FinishNs are when the error
// was returned, and the latency and token fields other than PromptTokens
// and OutputTokens are zero.
type Done struct {
	ID           uint64
	Tag          uint64
	ArrivalNs    int64
	FirstTokenNs int64
	FinishNs     int64
	TTFTMs       float64 // FirstTokenNs - ArrivalNs
	TBOTMs       float64 // mean time between output tokens; 0 for one token
	PromptTokens int
	CachedTokens int // prompt tokens found in the prefix cache
	OutputTokens int
	Error        string // "" when served, else ErrorInjected or ErrorUnhealthy
}

// The Error values of a failed Done.
const (
	ErrorInjected  = "injected"  // failed at admission by SetErrorRate
	ErrorUnhealthy = "unhealthy" // rejected on arrival by SetHealthy(false)
)

// ErrPast is returned for a call whose time is before the engine's clock.
var ErrPast = errors.New("engine: time before the last processed time")

// Stats are running totals since New or Reset.
type Stats struct {
	Submitted    int64 // valid Submit calls, rejected ones included
	Served       int64
	Injected     int64 // failed at admission by the error rate
	Rejected     int64 // rejected while unhealthy
	PromptTokens int64 // of admitted requests
	CachedTokens int64 // of admitted requests, found in the prefix cache
	OutputTokens int64 // of admitted requests
	// Prefills counts prefill iterations; in chunked mode, the steps that
	// carry prompt chunks (their decodes included). DecodeSteps counts
	// the steps that only decode. Every iteration is in one of the two,
	// and so is its time.
	Prefills    int64
	DecodeSteps int64
	PrefillNs   int64 // virtual time spent in prefill iterations
	DecodeNs    int64 // virtual time spent in decode steps
}

// BusyNs is the virtual time the engine spent computing; divided by the
// elapsed time it is the engine's utilisation.
func (s Stats) BusyNs() int64 { return s.PrefillNs + s.DecodeNs }

// Status is the engine's state now, as an engine would report it.
type Status struct {
	Running int // prefilling or decoding
	Waiting int // queued for admission
	// KVUtilization is what vLLM exports as kv_cache_usage_perc: the KV
	// memory held by running requests (prefilling or decoding) over the
	// engine's KV memory, in [0, 1]. A running request holds its prompt
	// tokens (in chunked mode, its cached prefix plus the chunks scheduled
	// so far) and the tokens it has generated. Prefix-cache blocks no
	// running request uses count as free, as in vLLM V1. See kvHeldTokens
	// for what the approximation leaves out.
	KVUtilization float64
	// PrefixCacheFill is the prefix cache's fill: cached blocks over its
	// capacity in blocks (0 with no cache). Once warm it stays near 1.
	PrefixCacheFill float64
	Healthy         bool
	ReadyReplicas   int
	TotalReplicas   int
	Slowdown        float64
	ErrorRate       float64
}

// record is a request inside the engine; records are pooled and reused.
type record struct {
	id, tag  uint64
	arrival  int64
	first    int64
	prompt   int
	output   int
	cached   int
	reserved int64 // KV tokens reserved while running (KVAdmission)
	enter    int64 // value of Engine.step once its first token was out
	left     int   // chunked: uncached prompt tokens not yet scheduled
	sched    int   // chunked: prompt tokens scheduled in the step under way
	blocks   []uint64
}

type iterKind uint8

const (
	iterNone    iterKind = iota // a decision is due at iterEnd
	iterPrefill                 // prefilling the records in Engine.prefill
	iterDecode                  // runSteps decode steps of stepNs each
	iterChunk                   // one chunked step: decodes and chunkN prompt chunks
)

// Engine is one simulated LLM engine. The zero value is not usable: call
// New. An Engine is not safe for concurrent use.
type Engine struct {
	params Params

	// Faults and replicas, and the timings derived from them by derive.
	healthy    bool
	slowdown   float64
	errRate    float64
	rng        splitmix
	ready      int
	total      int
	maxBatch   int
	nsPerToken float64
	overheadNs float64
	baseNs     float64
	perSeqNs   float64
	kvLimit    int64
	chunked    bool
	budget     int // chunked: tokens per step over the ready replicas

	// The clock and the iteration in progress. While busy, a decision is
	// due at iterEnd; when not busy, nothing is waiting that can run.
	now       int64
	through   int64 // every boundary at or before it has been processed
	busy      bool
	kind      iterKind
	iterStart int64
	iterEnd   int64
	stepNs    int64
	runSteps  int64
	step      int64  // decode steps completed
	seq       uint64 // admissions so far, orders requests finishing together
	uncached  int64  // prompt tokens to compute in the current prefill
	chunkN    int    // chunked: records of prefill with a chunk in this step

	recs       []record
	free       []int32
	waiting    fifo
	prefill    []int32
	running    runHeap
	kvReserved int64
	kv         kvHeld
	cache      blockLRU
	pending    []Done // finished by Submit or a setter, returned by Advance
	stats      Stats

	firstOn bool         // EnableFirstTokens
	firsts  []FirstToken // not yet taken by TakeFirstTokens
}

// New returns an idle engine at time 0.
func New(p Params) (*Engine, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("engine: new: %w", err)
	}
	e := &Engine{params: p, cache: newBlockLRU(0)}
	e.Reset()
	return e, nil
}

// Reset returns the engine to the state New left it in (time 0, empty,
// healthy, no faults), keeping its memory for reuse. Whether first tokens
// are recorded (EnableFirstTokens) is kept; untaken ones are dropped.
func (e *Engine) Reset() {
	p := e.params
	e.healthy, e.slowdown, e.errRate, e.rng = true, 1, 0, splitmix{}
	e.ready = max(p.Replicas, 1)
	e.total = e.ready
	e.now, e.through, e.busy, e.kind = 0, -1, false, iterNone
	e.iterStart, e.iterEnd, e.stepNs, e.runSteps, e.step, e.seq, e.uncached, e.chunkN = 0, 0, 0, 0, 0, 0, 0, 0
	e.free = e.free[:0]
	for i := len(e.recs) - 1; i >= 0; i-- { // keep the records' block buffers
		e.free = append(e.free, int32(i))
	}
	e.waiting.reset()
	e.prefill, e.running, e.pending = e.prefill[:0], e.running[:0], e.pending[:0]
	e.kvReserved, e.kv, e.stats = 0, kvHeld{}, Stats{}
	e.firsts = e.firsts[:0]
	e.derive()
	e.cache.reset(e.cacheBlocks())
}

// Params returns the parameters the engine was built with.
func (e *Engine) Params() Params { return e.params }

// Stats returns the totals since New or Reset.
func (e *Engine) Stats() Stats { return e.stats }

// Status returns the engine's state.
func (e *Engine) Status() Status {
	s := Status{
		Running:       len(e.prefill) + len(e.running),
		Waiting:       e.waiting.len(),
		Healthy:       e.healthy,
		ReadyReplicas: e.ready,
		TotalReplicas: e.total,
		Slowdown:      e.slowdown,
		ErrorRate:     e.errRate,
	}
	if e.cache.capacity > 0 {
		s.PrefixCacheFill = float64(e.cache.size) / float64(e.cache.capacity)
	}
	if e.kvLimit > 0 {
		s.KVUtilization = min(float64(e.kvHeldTokens())/float64(e.kvLimit), 1)
	}
	return s
}

// Submit queues r, arriving at now. Iterations ending before now are
// processed first (their completions come out of the next Advance), so an
// arrival at the very time an iteration ends is seen by the decision taken
// then, unless Advance(now) was called before Submit. While unhealthy the
// engine rejects r at once with an ErrorUnhealthy completion.
func (e *Engine) Submit(now int64, r Request) error {
	if err := e.checkRequest(now, r); err != nil {
		return err
	}
	e.catchUp(now)
	e.stats.Submitted++
	if !e.healthy {
		e.stats.Rejected++
		e.pending = append(e.pending, Done{ID: r.ID, Tag: r.Tag, ArrivalNs: now, FirstTokenNs: now, FinishNs: now,
			PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens, Error: ErrorUnhealthy})
		return nil
	}
	i := e.alloc(now, r)
	wasEmpty := e.waiting.len() == 0
	e.waiting.push(i)
	switch {
	case !e.busy:
		e.wake(now)
	case wasEmpty && e.kind == iterDecode && e.canAdmit(i):
		// The arrival can join at the end of the step under way. (When
		// others were already waiting, the head of the queue decides.)
		e.cutRun()
	}
	return nil
}

func (e *Engine) checkRequest(now int64, r Request) error {
	if now < e.now {
		return fmt.Errorf("engine: submit request %d at %d ns: %w (%d ns)", r.ID, now, ErrPast, e.now)
	}
	if r.PromptTokens < 0 || r.PromptTokens > maxTokens || r.OutputTokens < 1 || r.OutputTokens > maxTokens {
		return fmt.Errorf("%w: request %d: prompt %d and output %d tokens must be in [0, 2^30] and [1, 2^30]",
			ErrInvalid, r.ID, r.PromptTokens, r.OutputTokens)
	}
	return nil
}

// NextEventTime is when the engine next needs Advance: the end of the
// current iteration, or now when completions are pending. It reports false
// when the engine has nothing to do.
func (e *Engine) NextEventTime() (int64, bool) {
	if len(e.pending) > 0 {
		return e.now, true
	}
	return e.iterEnd, e.busy
}

// Advance processes every iteration ending at or before to and appends
// the requests that finished, in order of finish time, to out.
func (e *Engine) Advance(to int64, out []Done) []Done {
	out = append(out, e.pending...)
	e.pending = e.pending[:0]
	out = e.run(to, out)
	e.now = max(e.now, to)
	return out
}

// catchUp processes the iterations ending strictly before now into
// pending and moves the clock to now.
func (e *Engine) catchUp(now int64) {
	e.pending = e.run(now-1, e.pending)
	e.now = now
}

func (e *Engine) alloc(now int64, r Request) int32 {
	var i int32
	if n := len(e.free); n > 0 {
		i = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		i = int32(len(e.recs))
		e.recs = append(e.recs, record{})
	}
	rec := &e.recs[i]
	rec.id, rec.tag, rec.arrival, rec.first = r.ID, r.Tag, now, 0
	rec.prompt, rec.output, rec.cached = r.PromptTokens, r.OutputTokens, 0
	rec.reserved = int64(r.PromptTokens) + int64(r.OutputTokens)
	rec.blocks = append(rec.blocks[:0], r.Blocks...)
	return i
}

func (e *Engine) release(i int32) { e.free = append(e.free, i) }
