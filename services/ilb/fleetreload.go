package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.opentelemetry.io/otel/metric"

	"github.com/ilb-router/ilb/services/internal/fleetwatch"
	svcrun "github.com/ilb-router/ilb/services/internal/run"
)

// watchFleet adds to g a watcher of the fleet file at path that hands
// every valid change to apply (first with the fleet as it is now, in
// case it changed since the command read it), and reloads it on SIGHUP.
func watchFleet(ctx context.Context, g *svcrun.Group, path string, log *slog.Logger, mp metric.MeterProvider,
	apply fleetwatch.Applier) error {
	w, err := fleetwatch.New(fleetwatch.Config{Path: path, Logger: log, Meter: mp})
	if err != nil {
		return err
	}
	if err := apply(w.Current()); err != nil {
		return err
	}
	w.OnChange(apply)
	g.Add("fleet-watch", func(ctx context.Context) error {
		stop := reloadOnSIGHUP(w.Reload)
		defer stop()
		return w.Run(ctx)
	})
	return nil
}

// reloadOnSIGHUP calls reload on every SIGHUP until stop is called.
func reloadOnSIGHUP(reload func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				reload()
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
