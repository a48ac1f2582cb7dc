package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/dataplane"
)

// devMembers is the live membership of the ilb dev fleet: the fleet file
// (--fleet, watched) and the admin endpoints change the engines without a
// restart. A change goes to the aggregator, the optimizer, the simulator
// (which starts an engine added, and lets one removed drain for
// --drain-timeout before it stops) and the data plane (which routes to an
// added engine once a snapshot weighs it, and drains a removed one).
type devMembers struct {
	d *devFleet

	mu      sync.Mutex
	current *schemas.Fleet
}

func newDevMembers(d *devFleet) *devMembers { return &devMembers{d: d, current: d.plan.fleet} }

// apply hands f to every service. A fleet whose clusters are not those
// ilb dev started with is refused (the data plane and the traffic
// generator serve those); so is one a service refuses (the aggregator
// and the optimizer check it first), leaving the rest unchanged.
func (m *devMembers) apply(f *schemas.Fleet) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.EqualFunc(f.Clusters, m.d.plan.fleet.Clusters, func(a, b schemas.FleetCluster) bool { return a.Name == b.Name }) {
		return errors.New("the clusters differ from those ilb dev started with: its data plane and traffic serve those; restart it to change clusters")
	}
	if err := m.d.agg.SetFleet(f); err != nil {
		return err
	}
	if err := m.d.opt.SetFleet(m.d.ctx, f); err != nil {
		return err
	}
	if err := m.d.sim.SetFleet(f); err != nil {
		return err
	}
	urls, capacity := map[string]string{}, map[string]int{}
	for _, e := range f.Engines {
		urls[e.Name] = m.d.sim.BaseURL(e.Name)
		capacity[e.Name] = max(1, e.MaxBatch) * max(1, e.Replicas)
	}
	m.d.dp.UpdateEngines(urls, capacity)
	var models dataplane.Config
	fleetModels(&models, f, false)
	m.d.dp.UpdateFleetModels(models.EngineModels, models.EngineMaxContext, models.DefaultModel)
	m.d.console.SetFleet(f)
	m.current = f
	return nil
}

// maxEngineBody bounds the body of POST /v1/dev/engines/NAME/add.
const maxEngineBody = 64 << 10

// addSpec is what POST /v1/dev/engines/NAME/add says about the engine:
// a fleet engine in the body, else a copy of engine like, else the
// engine of that name in the fleet ilb dev started with.
func (m *devMembers) addSpec(name, like string, body []byte) (schemas.FleetEngine, error) {
	var e schemas.FleetEngine
	switch {
	case len(body) > 0:
		dec := yaml.NewDecoder(bytes.NewReader(body))
		dec.KnownFields(true) // a misspelt field is an error, as in a fleet file
		if err := dec.Decode(&e); err != nil {
			return e, fmt.Errorf("body: want one fleet engine as JSON or YAML: %v", err)
		}
	case like != "":
		m.mu.Lock()
		src, ok := m.current.Engine(like)
		m.mu.Unlock()
		if !ok {
			return e, fmt.Errorf("like=%s: no such engine in the fleet", like)
		}
		e = src
	default:
		src, ok := m.d.plan.fleet.Engine(name)
		if !ok {
			return e, fmt.Errorf("engine %s was not in the starting fleet: say which engine it is like (?like=ENGINE) or give it as JSON in the body", name)
		}
		e = src
	}
	e.Name, e.URL = name, ""
	one := schemas.Fleet{Engines: []schemas.FleetEngine{e}}
	one.ApplyDefaults() // the engine's defaults (replicas, scheduler), as a fleet file gets them
	return one.Engines[0], nil
}

// edit applies the current fleet with engine name removed, or, when add
// is set, with e (re)placed.
func (m *devMembers) edit(name string, add *schemas.FleetEngine) (*schemas.Fleet, error) {
	m.mu.Lock()
	next := *m.current
	m.mu.Unlock()
	next.Engines = slices.DeleteFunc(slices.Clone(next.Engines), func(e schemas.FleetEngine) bool { return e.Name == name })
	if add != nil {
		next.Engines = append(next.Engines, *add)
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
	mux.HandleFunc("POST /v1/dev/engines/{name}/remove", func(w http.ResponseWriter, r *http.Request) {
		f, err := m.edit(r.PathValue("name"), nil)
		m.answer(w, f, err)
	})
	mux.HandleFunc("POST /v1/dev/engines/{name}/add", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEngineBody))
		if err != nil {
			m.answer(w, nil, fmt.Errorf("body: %w", err))
			return
		}
		e, err := m.addSpec(r.PathValue("name"), r.URL.Query().Get("like"), body)
		if err != nil {
			m.answer(w, nil, err)
			return
		}
		f, err := m.edit(e.Name, &e)
		m.answer(w, f, err)
	})
}

func (m *devMembers) answer(w http.ResponseWriter, f *schemas.Fleet, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err == nil && f == nil {
		err = errors.New("no fleet")
	}
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
