package traffic

import (
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of what a Generator has sent and got back.
type Stats struct {
	Elapsed  time.Duration  // since Run started
	Total    ClusterStats   // all clusters; Cluster is empty
	Clusters []ClusterStats // in Config order
}

// ClusterStats counts one cluster's traffic since Run started.
type ClusterStats struct {
	Cluster string
	// DemandRPS is the target request rate now: the cluster's share of
	// the total demand times Multiplier.
	DemandRPS  float64
	Multiplier float64 // the swing factor in force now

	Conversations       int64 // started
	ActiveConversations int64
	Sent                int64 // requests sent
	OK                  int64 // answered 200
	// Good counts the answers within Config.SLO: goodput. Good over
	// OK+Shed+Errors is the SLO attainment, shed and failed requests
	// counting as misses.
	Good     int64
	Shed     int64 // answered 429
	Errors   int64 // any other status, or a transport error
	Dropped  int64 // turns or arrivals not sent: a bound was reached
	InFlight int64

	// PromptTokens and CachedTokens sum the usage the engines reported;
	// CachedTokens/PromptTokens is the prefix-cache hit ratio the traffic
	// saw.
	PromptTokens int64
	CachedTokens int64
	// FollowUps counts answered turns after the first; SameEngine those
	// served by the engine that served the conversation's previous turn.
	FollowUps  int64
	SameEngine int64

	LatencyMs Quantiles // whole request, over the recent answered ones
	TTFTMs    Quantiles // to the first streamed token (Stream only)
	TBOTMs    Quantiles // mean time between output tokens (Stream only)
	// Engines counts answered requests by the engine that served them (the
	// data plane's X-Ilb-Engine header).
	Engines map[string]int64
}

// Quantiles summarise recent samples; N is how many.
type Quantiles struct {
	N   int
	P50 float64
	P90 float64
	P99 float64
}

// counters are one cluster's live counts.
type counters struct {
	name     string
	baseRPS  float64
	convs    atomic.Int64
	active   atomic.Int64
	sent     atomic.Int64
	ok       atomic.Int64
	good     atomic.Int64
	shed     atomic.Int64
	errs     atomic.Int64
	dropped  atomic.Int64
	inFlight atomic.Int64
	prompt   atomic.Int64
	cached   atomic.Int64
	follow   atomic.Int64
	same     atomic.Int64

	mu      sync.Mutex // guards the rings and engines
	latency ring
	ttft    ring
	tbot    ring
	engines map[string]int64
}

func newCounters(name string, baseRPS float64, samples int) *counters {
	return &counters{name: name, baseRPS: baseRPS, latency: newRing(samples), ttft: newRing(samples),
		tbot: newRing(samples), engines: map[string]int64{}}
}

// answered records a 200 response; good says it met the SLO.
func (c *counters) answered(r *result, good, followUp, sameEngine bool) {
	c.ok.Add(1)
	if good {
		c.good.Add(1)
	}
	c.prompt.Add(int64(r.promptTokens))
	c.cached.Add(int64(r.cachedTokens))
	if followUp {
		c.follow.Add(1)
		if sameEngine {
			c.same.Add(1)
		}
	}
	c.mu.Lock()
	c.latency.add(ms(r.latency))
	if r.streamed {
		c.ttft.add(ms(r.ttft))
		c.tbot.add(ms(r.tbot))
	}
	if r.engine != "" {
		c.engines[r.engine]++
	}
	c.mu.Unlock()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (c *counters) stats(swings []Swing, elapsed time.Duration) ClusterStats {
	m := Multiplier(swings, c.name, elapsed)
	s := ClusterStats{Cluster: c.name, DemandRPS: c.baseRPS * m, Multiplier: m,
		Conversations: c.convs.Load(), ActiveConversations: c.active.Load(), Sent: c.sent.Load(),
		OK: c.ok.Load(), Good: c.good.Load(), Shed: c.shed.Load(), Errors: c.errs.Load(), Dropped: c.dropped.Load(),
		InFlight: c.inFlight.Load(), PromptTokens: c.prompt.Load(), CachedTokens: c.cached.Load(),
		FollowUps: c.follow.Load(), SameEngine: c.same.Load()}
	c.mu.Lock()
	s.LatencyMs = quantiles(c.latency.values())
	s.TTFTMs = quantiles(c.ttft.values())
	s.TBOTMs = quantiles(c.tbot.values())
	s.Engines = maps.Clone(c.engines)
	c.mu.Unlock()
	return s
}

// total sums per-cluster stats; quantiles come from the merged samples.
func total(cs []*counters, per []ClusterStats) ClusterStats {
	t := ClusterStats{Engines: map[string]int64{}}
	for _, s := range per {
		t.DemandRPS += s.DemandRPS
		t.Conversations += s.Conversations
		t.ActiveConversations += s.ActiveConversations
		t.Sent += s.Sent
		t.OK += s.OK
		t.Good += s.Good
		t.Shed += s.Shed
		t.Errors += s.Errors
		t.Dropped += s.Dropped
		t.InFlight += s.InFlight
		t.PromptTokens += s.PromptTokens
		t.CachedTokens += s.CachedTokens
		t.FollowUps += s.FollowUps
		t.SameEngine += s.SameEngine
		for e, n := range s.Engines {
			t.Engines[e] += n
		}
	}
	var lat, ttft, tbot []float64
	for _, c := range cs {
		c.mu.Lock()
		lat = append(lat, c.latency.values()...)
		ttft = append(ttft, c.ttft.values()...)
		tbot = append(tbot, c.tbot.values()...)
		c.mu.Unlock()
	}
	t.LatencyMs, t.TTFTMs, t.TBOTMs = quantiles(lat), quantiles(ttft), quantiles(tbot)
	base := 0.0
	for _, c := range cs {
		base += c.baseRPS
	}
	if base > 0 {
		t.Multiplier = t.DemandRPS / base
	}
	return t
}

// ring keeps the last len(buf) samples.
type ring struct {
	buf  []float64
	next int
	full bool
}

func newRing(n int) ring { return ring{buf: make([]float64, n)} }

func (r *ring) add(v float64) {
	r.buf[r.next] = v
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// values returns a copy of the samples.
func (r *ring) values() []float64 {
	if r.full {
		return slices.Clone(r.buf)
	}
	return slices.Clone(r.buf[:r.next])
}

// quantiles sorts xs in place and reads the nearest-rank quantiles.
func quantiles(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	slices.Sort(xs)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(xs)))) - 1
		return xs[max(0, min(i, len(xs)-1))]
	}
	return Quantiles{N: len(xs), P50: at(0.5), P90: at(0.9), P99: at(0.99)}
}
