package dataplane

import (
	"context"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
)

// probeConcurrency bounds the probes in flight at once.
const probeConcurrency = 16

// runProbes probes every engine with a URL once per ProbeInterval.
func (d *DataPlane) runProbes(ctx context.Context) error {
	t := time.NewTicker(d.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			d.probeAll(ctx)
		}
	}
}

// probeAll probes concurrently, then applies every result under one lock.
func (d *DataPlane) probeAll(ctx context.Context) {
	d.mu.Lock()
	var targets []*engine
	for _, name := range sortedKeys(d.reg.byName) {
		if e := d.reg.byName[name]; e.url() != "" {
			targets = append(targets, e)
		}
	}
	d.mu.Unlock()
	ok := make([]bool, len(targets))
	var g errgroup.Group
	g.SetLimit(probeConcurrency)
	for i, e := range targets {
		g.Go(func() error {
			ok[i] = d.probe(ctx, e.url())
			return nil
		})
	}
	_ = g.Wait()
	if ctx.Err() != nil {
		return
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	for i, e := range targets {
		changed = d.probeResultLocked(e, ok[i]) || changed
	}
	if changed {
		d.rebuildLocked(now)
	}
}

// probe reports whether GET base+ProbePath answered 2xx within the
// interval.
func (d *DataPlane) probe(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ProbeInterval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+d.cfg.ProbePath, nil)
	if err != nil {
		return false
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// probeResultLocked records one probe and reports whether the engine's
// probe state flipped: ProbeFailures failures in a row mark it down, one
// success marks it up.
func (d *DataPlane) probeResultLocked(e *engine, ok bool) bool {
	if ok {
		e.probeFails = 0
		if e.probeDown {
			e.probeDown = false
			d.log.Info("engine probe healthy again", "engine", e.name)
			return true
		}
		return false
	}
	e.probeFails++
	if !e.probeDown && e.probeFails >= d.cfg.ProbeFailures {
		e.probeDown = true
		d.log.Warn("engine probe failing: unavailable", "engine", e.name, "failures", e.probeFails)
		return true
	}
	return false
}
