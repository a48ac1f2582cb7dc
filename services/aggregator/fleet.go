package aggregator

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/regress"
)

// Live fleet changes.
//
// What the aggregator takes from the fleet file (ConfigFromFleet: max
// batch sizes, request classes, SKUs, replica counts, the TTFT SLO) can
// change while it runs. SetFleet applies a new fleet at once to every
// owned partition's windows, and to partitions assigned later, for the
// events added from then on; the profile fits take it at their next
// refit. An engine the new fleet no longer lists is forgotten by the
// fits: its history, its engine profile and its TTFT gauge go, and its
// windows are not fitted again until a fleet lists it again (a drained
// engine still reporting would otherwise pool into its SKU's fit with an
// unknown replica count). Its feature rows are still published: the
// optimizer decides what a row of an engine it does not know means.
//
// Windows are closed by the watermark, never by waiting for engines, so
// nothing here waits for a removed engine (the optimizer's event clock
// does: ticks.setEngines).
//
// With the event clock a replay of a recorded signal stream fits what
// the live run did only when the fleet file did not change meanwhile: a
// fleet change happens at a wall-clock instant the stream does not hold.

// profilerUpdate is a fleet change waiting for the profiler's owner (the
// fitting goroutine takes it before its next fit).
type profilerUpdate struct {
	regress  regress.Config
	skus     map[string]string
	replicas map[string]int
	removed  []string
}

// SetFleet applies a new fleet file (see above). It fails, changing
// nothing, when the fleet makes the configuration invalid.
func (a *Aggregator) SetFleet(f *schemas.Fleet) error {
	next := a.cfg
	next.ConfigFromFleet(f)
	if err := next.Validate(); err != nil {
		return fmt.Errorf("aggregator: fleet: %w", err)
	}
	fc := next.windowConfig()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(a.core.parts)) {
		if err := a.core.parts[p].f.Reconfigure(fc); err != nil {
			// Only the fleet's fields differ from what New validated.
			return fmt.Errorf("aggregator: fleet: partition %d: %w", p, err)
		}
	}
	a.core.fc = fc
	var removed []string
	for _, name := range slices.Sorted(maps.Keys(a.fleetEngines)) {
		if _, ok := f.Engine(name); !ok {
			removed = append(removed, name)
		}
	}
	a.fleetEngines = map[string]bool{}
	for _, e := range f.Engines {
		a.fleetEngines[e.Name] = true
	}
	a.hist.forget(removed, a.fleetEngines)
	a.cnt.dropP99(removed)
	// Chained onto an update not taken yet, so its removals are not lost;
	// u is complete before the profiler can see it.
	for {
		old := a.profNext.Load()
		u := &profilerUpdate{regress: next.Regress, skus: next.SKUs, replicas: next.Replicas, removed: removed}
		if old != nil {
			u.removed = append(slices.Clone(old.removed), removed...)
		}
		if a.profNext.CompareAndSwap(old, u) {
			break
		}
	}
	a.log.Info("aggregator: fleet applied", "engines", len(f.Engines), "removed", removed)
	return nil
}

// takeFleetUpdate applies a pending fleet change to the profiler; called
// by the profiler's owner before it fits. A removed engine's profile
// leaves the table, which is then published again without it.
func (a *Aggregator) takeFleetUpdate() {
	u := a.profNext.Swap(nil)
	if u == nil {
		return
	}
	pr := a.prof
	pr.cfg, pr.skus, pr.replicas = u.regress, u.skus, u.replicas
	for _, name := range u.removed {
		if _, listed := u.replicas[name]; listed {
			continue // removed, then listed again
		}
		k := profKey{engine: name}
		if _, ok := pr.current[k]; ok {
			a.pending = true // the published table still has it
		}
		delete(pr.current, k)
		delete(pr.fits, k)
		delete(pr.last, k)
	}
}

// forget drops the history of the removed engines and ignores their
// windows from now on; engines the fleet lists are taken again.
func (h *history) forget(removed []string, listed map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.gone {
		if listed[name] {
			delete(h.gone, name)
		}
	}
	if len(h.gone)+len(removed) > h.maxEngines {
		clear(h.gone) // bounded: a name forgotten long ago may be fitted again
	}
	for _, name := range removed {
		delete(h.engines, name)
		h.gone[name] = true
	}
}

func (c *counters) dropP99(engines []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range engines {
		delete(c.p99, e)
	}
}
