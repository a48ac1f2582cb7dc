package fleetwatch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/ilb-router/ilb/schemas"
)

// Applier takes a new, valid fleet into a service; an error refuses it
// (the service keeps its current fleet, and the watcher logs and counts
// the refusal). Appliers run on the watcher's goroutine and must not
// block for long.
type Applier func(*schemas.Fleet) error

// Config says which file to watch and how often.
type Config struct {
	Path     string
	Interval time.Duration // poll period; 1 s by default
	Logger   *slog.Logger
	Meter    metric.MeterProvider
}

// Watcher polls one fleet file.
type Watcher struct {
	cfg      Config
	log      *slog.Logger
	reloads  metric.Int64Counter
	appliers []Applier
	trigger  chan struct{} // capacity 1: coalesced reload requests
	current  atomic.Pointer[schemas.Fleet]
	ran      atomic.Bool

	// Owned by Run.
	seen [32]byte // hash of the content last acted on, good or bad
}

// Result labels of ilb_fleetwatch_reloads_total.
const (
	ResultOK       = "ok"
	ResultRejected = "rejected"
)

// New reads and validates the file once: a service does not start on a
// bad fleet.
func New(cfg Config) (*Watcher, error) {
	if cfg.Path == "" {
		return nil, errors.New("fleetwatch: no file")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Meter == nil {
		cfg.Meter = noop.NewMeterProvider()
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger, trigger: make(chan struct{}, 1)}
	var err error
	w.reloads, err = cfg.Meter.Meter("github.com/ilb-router/ilb/services/internal/fleetwatch").Int64Counter(
		"ilb.fleetwatch.reloads", metric.WithDescription("Fleet file changes acted on, by result (ok, rejected)."))
	if err != nil {
		return nil, fmt.Errorf("fleetwatch: metrics: %w", err)
	}
	b, err := os.ReadFile(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("fleetwatch: %w", err)
	}
	f, err := schemas.ParseFleet(b)
	if err != nil {
		return nil, fmt.Errorf("fleetwatch: %s: %w", cfg.Path, err)
	}
	w.seen = sha256.Sum256(b)
	w.current.Store(f)
	return w, nil
}

// OnChange adds an applier; call it before Run.
func (w *Watcher) OnChange(a Applier) { w.appliers = append(w.appliers, a) }

// Current returns the fleet in force.
func (w *Watcher) Current() *schemas.Fleet { return w.current.Load() }

// Reload asks Run to read the file now, even if it looks unchanged (a
// fleet an applier refused is offered again). Calls coalesce.
func (w *Watcher) Reload() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// Run polls until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if w.ran.Swap(true) {
		return errors.New("fleetwatch: Run called twice")
	}
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.check(ctx, false)
		case <-w.trigger:
			w.check(ctx, true)
		}
	}
}

// check reads the file and, if it changed (or force), validates and
// applies it.
func (w *Watcher) check(ctx context.Context, force bool) {
	b, err := os.ReadFile(w.cfg.Path)
	if err != nil {
		// Missing for a moment while an editor or kubelet swaps it: the
		// next poll sees the new one. Counted once per forced reload.
		if force {
			w.reject(ctx, fmt.Errorf("read: %w", err))
		}
		return
	}
	sum := sha256.Sum256(b)
	if sum == w.seen && !force {
		return
	}
	w.seen = sum
	f, err := schemas.ParseFleet(b)
	if err != nil {
		w.reject(ctx, err)
		return
	}
	for _, a := range w.appliers {
		if err := a(f); err != nil {
			w.reject(ctx, err)
			return
		}
	}
	w.current.Store(f)
	w.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("result", ResultOK)))
	w.log.Info("fleet reloaded", "file", w.cfg.Path, "clusters", len(f.Clusters), "engines", len(f.Engines))
}

func (w *Watcher) reject(ctx context.Context, err error) {
	w.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("result", ResultRejected)))
	w.log.Warn("fleet file rejected; the last good fleet stays in force", "file", w.cfg.Path, "err", err)
}
