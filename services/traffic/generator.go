package traffic

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// Generator plays conversations against a data plane.
type Generator struct {
	// Fixed at New.
	cfg      Config
	log      *slog.Logger
	client   *client
	clusters []*counters
	metrics  *metrics

	sem     chan struct{} // one token per request in flight
	live    atomic.Int64  // live conversations, all clusters
	started atomic.Int64  // Run's start, Unix nanoseconds; 0 before Run
}

// New validates cfg and returns a Generator ready to Run.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, log: cfg.Logger, client: newClient(&cfg), sem: make(chan struct{}, cfg.MaxInFlight)}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	shares := 0.0
	for _, c := range cfg.Clusters {
		shares += c.DemandShare
	}
	for _, c := range cfg.Clusters {
		g.clusters = append(g.clusters, newCounters(c.Name, cfg.TotalDemandRPS*c.DemandShare/shares, cfg.LatencySamples))
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m, err := newMetrics(mp, g)
	if err != nil {
		return nil, err
	}
	g.metrics = m
	return g, nil
}

// Run generates traffic until ctx is cancelled, then waits for the
// conversations in progress (their requests are cancelled with ctx) and
// returns nil. It may be called once.
func (g *Generator) Run(ctx context.Context) error {
	if !g.started.CompareAndSwap(0, time.Now().UnixNano()) {
		return errors.New("traffic: Run called twice")
	}
	defer g.metrics.close()
	start := time.Unix(0, g.started.Load())
	var wg sync.WaitGroup
	for i := range g.clusters {
		wg.Go(func() { g.arrivals(ctx, i, start, &wg) })
	}
	wg.Wait()
	if c, ok := g.client.http.Transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return nil
}

// Stats returns the counts so far; before Run they are all zero.
func (g *Generator) Stats() Stats {
	var elapsed time.Duration
	if s := g.started.Load(); s != 0 {
		elapsed = time.Since(time.Unix(0, s))
	}
	st := Stats{Elapsed: elapsed}
	for _, c := range g.clusters {
		st.Clusters = append(st.Clusters, c.stats(g.cfg.Swings, elapsed))
	}
	st.Total = total(g.clusters, st.Clusters)
	return st
}

// arrivals starts cluster i's conversations as they arrive.
func (g *Generator) arrivals(ctx context.Context, i int, start time.Time, wg *sync.WaitGroup) {
	p := newArrivalProcess(&g.cfg, i, g.clusters[i].baseRPS)
	for {
		at, script, ok := p.next()
		if !ok || !sleepUntil(ctx, start.Add(at)) {
			return
		}
		c := g.clusters[i]
		if g.live.Add(1) > int64(g.cfg.MaxConversations) {
			g.live.Add(-1)
			c.dropped.Add(1)
			continue
		}
		c.convs.Add(1)
		c.active.Add(1)
		wg.Go(func() {
			defer g.live.Add(-1)
			defer c.active.Add(-1)
			g.converse(ctx, c, &script)
		})
	}
}

// converse plays one conversation turn by turn. A turn that is shed,
// fails or cannot be sent ends the conversation, as a user would give up.
func (g *Generator) converse(ctx context.Context, c *counters, s *Script) {
	msgs := []message{{Role: "system", Content: systemPrompt}}
	prev := ""
	for i, turn := range s.Turns {
		if i > 0 && !sleepUntil(ctx, time.Now().Add(turn.Think)) {
			return
		}
		msgs = append(msgs, message{Role: "user", Content: s.UserMessage(i)})
		select {
		case g.sem <- struct{}{}:
		default:
			c.dropped.Add(1)
			return
		}
		c.sent.Add(1)
		c.inFlight.Add(1)
		r := g.client.send(ctx, s, msgs, turn.MaxTokens)
		c.inFlight.Add(-1)
		<-g.sem
		if ctx.Err() != nil {
			return // shutting down: not the data plane's fault
		}
		if !g.record(c, &r, i > 0, prev) {
			return
		}
		prev = r.engine
		msgs = append(msgs, message{Role: "assistant", Content: r.content})
	}
}

// record counts r and reports whether the conversation goes on.
func (g *Generator) record(c *counters, r *result, followUp bool, prev string) bool {
	switch {
	case r.err == nil && r.status == http.StatusOK:
		c.answered(r, g.cfg.SLO.met(r), followUp, r.engine != "" && r.engine == prev)
		return true
	case r.status == http.StatusTooManyRequests:
		c.shed.Add(1)
	default:
		// Log the 1st, 2nd, 4th, 8th... error: enough to see it, never a flood.
		if n := c.errs.Add(1); bits.OnesCount64(uint64(n)) == 1 {
			g.log.Warn("traffic: request failed", "cluster", c.name, "status", r.status, "err", r.err, "errors", n)
		}
	}
	return false
}

// sleepUntil waits until t; false when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// arrivalProcess draws one cluster's conversation arrivals: a Poisson
// process whose rate follows the swings, by thinning (candidates at the
// peak rate, each kept with probability rate/peak), so the times are exact
// for any schedule and depend only on the seed.
type arrivalProcess struct {
	cfg     *Config
	name    string
	rng     *rand.Rand
	base    float64 // conversations per second before the swing
	peak    float64
	elapsed float64 // seconds, the last candidate
	n       uint64
}

func newArrivalProcess(cfg *Config, i int, baseRPS float64) *arrivalProcess {
	name := cfg.Clusters[i].Name
	base := baseRPS / cfg.MeanTurns
	return &arrivalProcess{cfg: cfg, name: name, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)),
		base: base, peak: base * peakMultiplier(cfg.Swings, name)}
}

// next returns the next arrival's time since the start and its script;
// false when the cluster has no demand.
func (p *arrivalProcess) next() (time.Duration, Script, bool) {
	if !(p.peak > 0) {
		return 0, Script{}, false
	}
	for {
		p.elapsed += p.rng.ExpFloat64() / p.peak
		at := time.Duration(p.elapsed * float64(time.Second))
		rate := p.base * Multiplier(p.cfg.Swings, p.name, at)
		if p.rng.Float64()*p.peak < rate {
			p.n++
			return at, newScript(p.cfg, p.name, p.n, p.rng), true
		}
	}
}
