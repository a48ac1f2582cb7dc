package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
)

// ErrNoLoadMetrics is a scrape whose body has none of the running,
// waiting and KV-cache families of the target's kind: it is treated as
// a failed scrape, never as an idle engine.
var ErrNoLoadMetrics = errors.New("adapter: no running, waiting or KV-cache metrics in the body")

// scraper is one target's loop; it owns the target's previous sample.
type scraper struct {
	a        *Adapter
	t        Target
	attrs    targetSets
	prev     Sample
	prevAt   time.Time
	havePrev bool
	ranks    int      // replicas last seen, for the unreachable status
	missing  []string // load families last found missing, to log changes
}

func (s *scraper) run(ctx context.Context) {
	ticker := time.NewTicker(s.a.cfg.Interval)
	defer ticker.Stop()
	for {
		s.once(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// once scrapes the target and publishes a status event and, from the
// second successful scrape on, the interval's completion events. A failed
// scrape publishes an unhealthy status and keeps the previous sample, so
// the next success covers the whole gap.
func (s *scraper) once(ctx context.Context, now time.Time) {
	ctx, span := s.a.tracer.Start(ctx, "adapter.scrape", trace.WithAttributes(targetAttr(s.t)))
	defer span.End()
	sample, err := s.a.scrape(ctx, s.t)
	if ctx.Err() != nil {
		return // shutting down
	}
	if err == nil && !sample.HasLoad() {
		err = fmt.Errorf("%w (want %s names; wrong URL or --kind?)", ErrNoLoadMetrics, s.t.Kind)
	}
	pctx := context.WithoutCancel(ctx)
	ts := now.UnixNano()
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		s.a.log.Warn("adapter: scrape failed", "engine", s.t.Engine, "err", err)
		s.a.metrics.scrape(ctx, &s.attrs, false)
		ev := schemas.Event{Kind: schemas.KindStatus, Status: Unreachable(s.t.Engine, ts, s.ranks)}
		s.a.publish(pctx, &ev, false)
		return
	}
	s.a.metrics.scrape(ctx, &s.attrs, true)
	s.logMissing(sample.Missing)
	ev := schemas.Event{Kind: schemas.KindStatus, Status: Status(s.t.Engine, ts, sample)}
	s.a.publish(pctx, &ev, false)
	s.completions(ctx, pctx, now, sample)
	s.prev, s.prevAt, s.havePrev, s.ranks = sample, now, true, sample.Ranks
}

// completions publishes the interval's synthesized completions. After a
// gap longer than MaxGapIntervals (the engine or the network was down a
// long while) the interval is skipped and counted: its requests would
// all land at one instant and read downstream as a burst of throughput.
func (s *scraper) completions(ctx, pctx context.Context, now time.Time, sample Sample) {
	if !s.havePrev {
		return
	}
	if gap := now.Sub(s.prevAt); gap > time.Duration(s.a.cfg.MaxGapIntervals)*s.a.cfg.Interval {
		s.a.log.Warn("adapter: interval too long to spread, no completions synthesized for it",
			"engine", s.t.Engine, "gap", gap)
		s.a.metrics.skipped(ctx, &s.attrs)
		return
	}
	comps, dropped := Completions(s.t.Engine, now.UnixNano(), Diff(s.prev, sample), s.a.cfg.MaxCompletionsPerScrape)
	for i := range comps {
		ev := schemas.Event{Kind: schemas.KindCompletion, Completion: comps[i]}
		s.a.publish(pctx, &ev, true)
	}
	s.a.metrics.completions(ctx, &s.attrs, len(comps), dropped)
}

// logMissing says once, and again when it changes, which load families
// the target lacks (they read as 0).
func (s *scraper) logMissing(missing []string) {
	if slices.Equal(missing, s.missing) {
		return
	}
	s.missing = missing
	if len(missing) > 0 {
		s.a.log.Warn("adapter: load metrics missing, read as 0", "engine", s.t.Engine, "missing", missing)
	}
}
