package enginesim

import (
	"context"
	"reflect"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// Live fleet changes (SetFleet, which `ilb engine-sim --fleet` and `ilb
// dev` call on every valid change of the watched fleet file): an engine
// added starts serving at once; an engine whose entry changed takes its
// new parameters for the requests arriving from then on (the requests it
// holds finish on the old ones; injected faults are cleared); an engine
// removed drains: it keeps serving, so that the conversations a data
// plane still sends it finish, for Config.DrainTimeout, then stops as soon
// as it holds no request (at the latest one more DrainTimeout later,
// answering what is left with 503), and is forgotten: its URL answers
// 404. An engine put back while it drains is kept as it is.

// engineSet is the engines served now; it is replaced, never changed.
type engineSet struct {
	fleet  *schemas.Fleet
	list   []*simEngine // fleet order, then the draining engines
	byName map[string]*simEngine
}

func (set *engineSet) add(e *simEngine) {
	set.list = append(set.list, e)
	set.byName[e.name] = e
}

// engine returns the served engine named name, nil when there is none.
func (s *Sim) engine(name string) *simEngine { return s.set.Load().byName[name] }

// fleet is the fleet in force.
func (s *Sim) fleet() *schemas.Fleet { return s.set.Load().fleet }

func (s *Sim) newEngine(sp engineSpec) *simEngine {
	e := &simEngine{name: sp.fleet.Name, key: []byte(sp.fleet.Name), seed: s.cfg.Seed ^ nameHash(sp.fleet.Name),
		submit: make(chan *call, 256), faults: make(chan faultReq), attrs: newEngineSets(sp.fleet.Name),
		respec: make(chan struct{}, 1), retire: make(chan struct{}), stopped: make(chan struct{})}
	e.spec.Store(&sp)
	return e
}

// startOwner runs o until the Sim stops or o's engine has drained; then
// the engine is forgotten. Called with s.mu held, after Run set
// ownersCtx and before it closed.
func (s *Sim) startOwner(o *owner) {
	ctx, cancel := context.WithCancel(s.ownersCtx)
	o.e.cancel = cancel
	s.owners.Go(func() {
		o.run(ctx)
		cancel()
		s.forget(o.e)
	})
}

// forget drops e from the served engines (when it is still the one
// serving its name) and keeps its counts in Stats.
func (s *Sim) forget(e *simEngine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retired.add(e)
	cur := s.set.Load()
	if cur.byName[e.name] != e {
		return
	}
	next := &engineSet{fleet: cur.fleet, byName: map[string]*simEngine{}}
	for _, x := range cur.list {
		if x != e {
			next.add(x)
		}
	}
	s.set.Store(next)
	if !s.closed {
		s.log.Info("engine removed from the fleet: drained and stopped", "engine", e.name)
	}
}

// SetFleet applies a new fleet (see above). It fails, changing nothing,
// when the fleet's engines cannot be simulated.
func (s *Sim) SetFleet(f *schemas.Fleet) error {
	cfg := s.cfg
	cfg.Fleet = f
	specs, err := cfg.liveEngineSpecs()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.set.Load()
	running := s.ownersCtx != nil && !s.closed
	// First what can fail: a model for every engine added.
	var added []*owner
	fresh := map[string]*simEngine{}
	for _, sp := range specs {
		if e := cur.byName[sp.fleet.Name]; e != nil && !e.retired {
			continue
		}
		e := s.newEngine(sp)
		fresh[e.name] = e
		if running {
			o, err := newOwner(s, e)
			if err != nil {
				return err
			}
			added = append(added, o)
		}
	}
	next := &engineSet{fleet: f, byName: map[string]*simEngine{}}
	for _, sp := range specs {
		if e := fresh[sp.fleet.Name]; e != nil {
			next.add(e)
			s.log.Info("engine added to the fleet", "engine", e.name)
			continue
		}
		e := cur.byName[sp.fleet.Name]
		if e.draining.Load() {
			e.drainTimer.Stop()
			e.drainTimer = nil
			e.draining.Store(false)
			s.log.Info("engine back in the fleet while it drained", "engine", e.name)
		}
		if old := e.spec.Load(); !reflect.DeepEqual(*old, sp) {
			e.spec.Store(&sp)
			select {
			case e.respec <- struct{}{}:
			default: // the owner has not taken the previous one yet
			}
		}
		next.add(e)
	}
	for _, e := range cur.list {
		if next.byName[e.name] != nil {
			continue
		}
		if !running {
			s.retired.add(e)
			continue
		}
		if !e.draining.Load() {
			e.draining.Store(true)
			e.drainTimer = time.AfterFunc(s.cfg.DrainTimeout, func() { s.endDrain(e) })
			s.log.Info("engine removed from the fleet: draining", "engine", e.name, "for", s.cfg.DrainTimeout)
		}
		next.add(e)
	}
	for _, o := range added {
		s.startOwner(o)
	}
	s.set.Store(next)
	return nil
}

// endDrain tells a removed engine's owner that its drain time is over.
func (s *Sim) endDrain(e *simEngine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !e.draining.Load() || e.retired || s.closed {
		return
	}
	e.retired = true
	close(e.retire)
}

// liveEngineSpecs are the specs of the engines to simulate in c.Fleet:
// with a subset (Engines), those of it the fleet still lists.
func (c Config) liveEngineSpecs() ([]engineSpec, error) {
	err := c.Validate()
	if err == nil {
		return c.engineSpecs()
	}
	if len(c.Engines) == 0 {
		return nil, err
	}
	keep := c.Engines[:0:0]
	for _, name := range c.Engines {
		if _, ok := c.Fleet.Engine(name); ok {
			keep = append(keep, name)
		}
	}
	if len(keep) == 0 {
		return nil, errNoSubsetEngine
	}
	c.Engines = keep
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c.engineSpecs()
}
