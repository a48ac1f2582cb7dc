package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
)

// DefaultShutdownTimeout bounds how long a Group waits for its components
// after the first one has returned or the context was cancelled.
const DefaultShutdownTimeout = 10 * time.Second

// ErrShutdownTimeout is returned when components did not stop in time.
var ErrShutdownTimeout = errors.New("run: components did not stop within the shutdown timeout")

// Group runs named components until the first returns, then cancels the
// others and waits for them, at most ShutdownTimeout.
type Group struct {
	ShutdownTimeout time.Duration
	actors          []actor
}

type actor struct {
	name string
	run  func(ctx context.Context) error
}

// Add registers a component. fn must return when its context is cancelled.
func (g *Group) Add(name string, fn func(ctx context.Context) error) {
	g.actors = append(g.actors, actor{name: name, run: fn})
}

// Run starts every component and blocks until all have returned, or until
// the shutdown timeout has passed after the first one returned. It returns
// the first error that is not a context cancellation, wrapped with the
// component's name; a clean stop by cancellation returns nil.
func (g *Group) Run(ctx context.Context) error {
	if len(g.actors) == 0 {
		return nil
	}
	eg, gctx := errgroup.WithContext(ctx)
	for _, a := range g.actors {
		eg.Go(func() error {
			err := a.run(gctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("%s: %w", a.name, err)
			}
			// A component that stops without error still ends the group:
			// the first to exit stops the rest.
			return errStopped
		})
	}
	done := make(chan error, 1)
	go func() { done <- eg.Wait() }()
	select {
	case err := <-done:
		return cleanErr(err)
	case <-gctx.Done():
	}
	timeout := g.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return cleanErr(err)
	case <-t.C:
		return ErrShutdownTimeout
	}
}

var errStopped = errors.New("stopped")

func cleanErr(err error) error {
	if errors.Is(err, errStopped) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
