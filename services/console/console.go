package console

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

//go:embed page.html
var page []byte

// Console samples its sources and serves the live page.
type Console struct {
	// Fixed at New, but for cfg.Fleet and colors, which the sampling
	// goroutine changes when SetFleet gave it a fleet.
	cfg     Config
	src     Sources
	log     *slog.Logger
	colors  map[string]string
	handler http.Handler

	// The encoded State the handlers serve: replaced, never mutated.
	state atomic.Pointer[[]byte]
	// nextFleet is the fleet SetFleet gave, taken by the next sample.
	nextFleet atomic.Pointer[schemas.Fleet]

	// Owned by the sampling goroutine (Run).
	started time.Time
	samples int64
	hist    history
	prev    previous
	windows map[string][]engineWindow // recent feature windows, for Calibration
}

// previous holds the counters of the last good sample of each source,
// for rates.
type previous struct {
	traffic map[string]stampedTraffic
	picks   map[string]stampedCount
	engines map[string]stampedEngine
	routing map[string]stampedRefusals
}

type stampedRefusals struct {
	shed, refused int64
	at            time.Time
}

type stampedEngine struct {
	s  EngineStats
	at time.Time
}

type stampedTraffic struct {
	t  TrafficCluster
	at time.Time
}

type stampedCount struct {
	n  int64
	at time.Time
}

// New validates cfg and returns a Console whose page already answers
// (with no data until Run has sampled).
func New(cfg Config, src Sources) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, src: src, log: cfg.Logger, colors: engineColors(cfg.Fleet),
		hist: newHistory(cfg.HistoryPoints)}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.handler = c.routes()
	if err := c.publish(c.emptyState(time.Now())); err != nil {
		return nil, err
	}
	return c, nil
}

// SetFleet shows fleet f from the next sample on: engines added get a
// colour and a row, engines and clusters removed leave the page; the
// charts keep their history of the engines and clusters both fleets list
// (an added engine's starts at zero).
func (c *Console) SetFleet(f *schemas.Fleet) { c.nextFleet.Store(f) }

// takeFleet applies the fleet SetFleet gave, on the sampling goroutine.
func (c *Console) takeFleet() {
	f := c.nextFleet.Swap(nil)
	if f == nil {
		return
	}
	c.hist.remap(c.cfg.Fleet, f)
	c.cfg.Fleet, c.colors = f, engineColors(f)
}

// Handler serves GET / (the page) and GET /api/state (JSON).
func (c *Console) Handler() http.Handler { return c.handler }

// Run samples the sources every SampleInterval until ctx ends; it returns
// nil then.
func (c *Console) Run(ctx context.Context) error {
	c.started = time.Now()
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	for {
		c.sampleAndPublish(ctx, time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (c *Console) sampleAndPublish(ctx context.Context, now time.Time) {
	st := c.sample(ctx, now)
	if err := c.publish(st); err != nil {
		c.log.Error("console: encode state", "err", err)
	}
}

// State returns the state the page was last given.
func (c *Console) State() (State, error) {
	var st State
	err := json.Unmarshal(*c.state.Load(), &st)
	return st, err
}

func (c *Console) publish(st State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("console: encode state: %w", err)
	}
	c.state.Store(&b)
	return nil
}

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		_, _ = w.Write(*c.state.Load())
	})
	return mux
}
