package backtest

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
)

// Backtest is a trace prepared for a fleet, ready to be simulated under
// each policy of its Config.
type Backtest struct {
	cfg     Config
	fi      *fleetInfo
	w       *workload
	summary TraceSummary
}

// New validates cfg, maps the trace onto the fleet (spreads coarse
// timestamps per cfg.Spread, jitters them per cfg.Jitter; AssignConversations, AssignClusters and
// AssignModels fill the requests' missing keys, clusters and models; all
// in place) and shapes it (Speed, Duration, Swings).
func New(cfg Config, tr *Trace) (*Backtest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	fi, err := newFleetInfo(cfg.Fleet)
	if err != nil {
		return nil, err
	}
	for _, f := range cfg.Failures {
		if _, ok := fi.engineIndex(f.Engine); !ok {
			return nil, fmt.Errorf("%w: --fail: engine %q is not in the fleet", ErrConfig, f.Engine)
		}
	}
	spread := cfg.Spread == SpreadOn || (cfg.Spread == SpreadAuto && coarse(tr))
	if spread {
		spreadArrivals(tr) // in place, like the mappings below; spreading twice changes nothing
	}
	jitterArrivals(tr, cfg.Jitter, cfg.Seed)
	tr.AssignConversations()
	if err := tr.AssignClusters(cfg.Fleet); err != nil {
		return nil, err
	}
	if err := tr.AssignModels(cfg.Fleet); err != nil {
		return nil, err
	}
	if cfg.AffinityKey == AffinityPrompt {
		tr.AssignPromptKeys()
	}
	w, err := buildWorkload(tr, fi, shaping{speed: cfg.Speed, duration: cfg.Duration, swings: cfg.Swings, seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	b := &Backtest{cfg: cfg, fi: fi, w: w}
	b.summary = TraceSummary{
		Format: string(tr.Format), Requests: w.len(), Conversations: len(w.convKey),
		DurationS:   float64(w.arrival[w.len()-1]) / 1e9,
		SwingCopies: w.copies, SwingDropped: w.dropped, Spread: spread, JitterMs: float64(cfg.Jitter) / 1e6,
	}
	return b, nil
}

// Summary describes the shaped workload.
func (b *Backtest) Summary() TraceSummary { return b.summary }

// Run simulates every policy, up to Config.Parallel at once, and returns
// their results in the order of Config.Policies.
func (b *Backtest) Run(ctx context.Context) (*Result, error) {
	res := &Result{Trace: b.summary, Seed: b.cfg.Seed, Speed: b.cfg.Speed}
	res.Policies = make([]PolicyResult, len(b.cfg.Policies))
	prog := newProgress(b.cfg.Progress, b.cfg.Clock, b.cfg.ProgressInterval)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(b.cfg.Parallel)
	for i, name := range b.cfg.Policies {
		g.Go(func() error {
			r, err := b.runPolicy(ctx, name, prog)
			if err != nil {
				return err
			}
			res.Policies[i] = *r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return res, nil
}

// RunPolicy simulates one policy.
func (b *Backtest) RunPolicy(ctx context.Context, name string) (*PolicyResult, error) {
	return b.runPolicy(ctx, name, newProgress(b.cfg.Progress, b.cfg.Clock, b.cfg.ProgressInterval))
}

func (b *Backtest) runPolicy(ctx context.Context, name string, prog *progress) (*PolicyResult, error) {
	start := b.cfg.Clock()
	s, err := newSim(&b.cfg, b.fi, b.w, name)
	if err != nil {
		return nil, err
	}
	s.progress = prog
	if err := s.run(ctx); err != nil {
		return nil, fmt.Errorf("backtest: %s: %w", name, err)
	}
	r := s.rec.result
	r.WallS = b.cfg.Clock().Sub(start).Seconds()
	b.fi.pool.put(s.engines...) // the run is over: nothing reads its engines again
	return &r, nil
}
