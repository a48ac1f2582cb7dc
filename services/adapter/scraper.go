package adapter

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
)

// scraper is one target's loop; it owns the target's previous sample.
type scraper struct {
	a        *Adapter
	t        Target
	idx      int
	prev     Sample
	havePrev bool
	ranks    int // replicas last seen, for the unreachable status
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
	pctx := context.WithoutCancel(ctx)
	ts := now.UnixNano()
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		s.a.log.Warn("adapter: scrape failed", "engine", s.t.Engine, "err", err)
		s.a.metrics.scrape(ctx, s.idx, false)
		ev := schemas.Event{Kind: schemas.KindStatus, Status: Unreachable(s.t.Engine, ts, s.ranks)}
		s.a.publish(pctx, &ev, false)
		return
	}
	s.a.metrics.scrape(ctx, s.idx, true)
	ev := schemas.Event{Kind: schemas.KindStatus, Status: Status(s.t.Engine, ts, sample)}
	s.a.publish(pctx, &ev, false)
	if s.havePrev {
		comps, dropped := Completions(s.t.Engine, ts, Diff(s.prev, sample), s.a.cfg.MaxCompletionsPerScrape)
		for i := range comps {
			ev := schemas.Event{Kind: schemas.KindCompletion, Completion: comps[i]}
			s.a.publish(pctx, &ev, true)
		}
		s.a.metrics.completions(ctx, s.idx, len(comps), dropped)
	}
	s.prev, s.havePrev, s.ranks = sample, true, sample.Ranks
}
