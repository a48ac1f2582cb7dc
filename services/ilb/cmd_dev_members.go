package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/ilb-router/ilb/schemas"
)

// devMembers is the live membership of the ilb dev fleet: the fleet file
// (--fleet, watched) and the admin endpoints change which of the
// simulated engines the optimizer and the data planes use, without a
// restart. The simulator runs the engines ilb dev started with, so a
// fleet may remove any of them and add them back, but not add an engine
// that is not simulated (that needs a restart; a real fleet's new engine
// is a new server, as livefleet_test.go runs it).
type devMembers struct {
	d *devFleet

	mu      sync.Mutex
	current *schemas.Fleet
}

func newDevMembers(d *devFleet) *devMembers { return &devMembers{d: d, current: d.plan.fleet} }

// apply validates f against the simulator and hands it to the optimizer
// and the data planes.
func (m *devMembers) apply(f *schemas.Fleet) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	urls, capacity := map[string]string{}, map[string]int{}
	for _, e := range f.Engines {
		if !slices.Contains(m.d.sim.EngineNames(), e.Name) {
			return fmt.Errorf("engine %s is not simulated: ilb dev runs the engines it started with; restart it to add new ones", e.Name)
		}
		urls[e.Name] = m.d.sim.BaseURL(e.Name)
		capacity[e.Name] = max(1, e.MaxBatch) * max(1, e.Replicas)
	}
	if err := m.d.opt.SetFleet(m.d.ctx, f); err != nil {
		return err
	}
	m.d.dp.UpdateEngines(urls, capacity)
	m.current = f
	return nil
}

// edit applies the current fleet with engine name removed or, when add,
// put back from the fleet ilb dev started with.
func (m *devMembers) edit(name string, add bool) (*schemas.Fleet, error) {
	m.mu.Lock()
	next := *m.current
	m.mu.Unlock()
	next.Engines = slices.DeleteFunc(slices.Clone(next.Engines), func(e schemas.FleetEngine) bool { return e.Name == name })
	if add {
		e, ok := m.d.plan.fleet.Engine(name)
		if !ok {
			return nil, fmt.Errorf("engine %s is not simulated", name)
		}
		next.Engines = append(next.Engines, e)
	} else if len(next.Engines) == len(m.current.Engines) {
		return nil, fmt.Errorf("engine %s is not in the fleet", name)
	}
	if err := next.Validate(); err != nil {
		return nil, err
	}
	return &next, m.apply(&next)
}

// mount serves GET /v1/dev/fleet (the engines in use and the simulated
// ones) and POST /v1/dev/engines/{name}/remove and .../add.
func (m *devMembers) mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/dev/fleet", func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		f := m.current
		m.mu.Unlock()
		m.answer(w, f, nil)
	})
	for _, op := range []string{"remove", "add"} {
		mux.HandleFunc("POST /v1/dev/engines/{name}/"+op, func(w http.ResponseWriter, r *http.Request) {
			f, err := m.edit(r.PathValue("name"), op == "add")
			m.answer(w, f, err)
		})
	}
}

func (m *devMembers) answer(w http.ResponseWriter, f *schemas.Fleet, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": err.Error(), "type": "invalid_request_error"}})
		return
	}
	names := []string{}
	for _, e := range f.Engines {
		names = append(names, e.Name)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"engines": names, "simulated": m.d.sim.EngineNames()})
}
