package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/ilb-router/ilb/services/aggregator"
	"github.com/ilb-router/ilb/services/console"
	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/optimizer"
)

// The console declares the small interfaces it reads; these adapters
// satisfy them from the services `ilb dev` runs, so the console imports
// no service.

// optimizerPlan is the optimizer's State as a console.Plan.
type optimizerPlan struct{ o *optimizer.Optimizer }

func (a optimizerPlan) Plan(context.Context) (console.Plan, error) {
	st := a.o.State()
	p := console.Plan{Version: st.Version, SolvedAt: st.SolvedAt, Solves: int64(st.Solves), ObjectiveMs: st.ObjectiveMs}
	switch {
	case st.LastError != "":
		p.Status = "last error: " + st.LastError
	case st.Solves == 0:
		p.Status = "waiting for features"
	}
	for _, c := range st.Clusters {
		p.Clusters = append(p.Clusters, console.ClusterPlan{Cluster: c.Name, DemandRPS: c.DemandRPS,
			ShedFraction: c.ShedFraction, Weights: c.Weights})
	}
	for _, e := range st.Engines {
		if e.Model == nil {
			continue // no capacity: nothing planned or predicted
		}
		p.Engines = append(p.Engines, console.EnginePlan{Name: e.Name, Profile: e.Profile, CapacityRPS: e.CapacityRPS,
			LoadRPS: e.LoadRPS, PredictedTTFTMs: e.PredictedTTFTMs, PredictedTBOTMs: e.PredictedTBOTMs,
			TTFTBaseMs: e.Model.TTFT.BaseMs, TTFTQueueMs: e.Model.TTFT.QueueMs,
			TBOTBaseMs: e.Model.TBOT.BaseMs, TBOTSlopeMs: e.Model.TBOT.SlopeMs})
	}
	return p, nil
}

// dataplaneRouting reads the data plane's GET /v1/routing in process: the
// documented contract, without a socket.
type dataplaneRouting struct{ d *dataplane.DataPlane }

// routingBody is the part of GET /v1/routing the console shows.
type routingBody struct {
	Clusters map[string]struct {
		Ready        bool               `json:"ready"`
		Version      uint64             `json:"version"`
		AgeSeconds   float64            `json:"age_seconds"`
		Stale        bool               `json:"stale"`
		ShedFraction float64            `json:"shed_fraction"`
		Weights      map[string]float64 `json:"weights"`
		ShedTotal    int64              `json:"shed_total"`
		RefusedTotal int64              `json:"refused_total"`
		Engines      []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
			InFlight  int64  `json:"in_flight"`
			Picks     int64  `json:"picks"`
		} `json:"engines"`
		Classes []console.RoutedClass `json:"classes"`
	} `json:"clusters"`
}

func (a dataplaneRouting) Routing(ctx context.Context) ([]console.Routing, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/routing", nil)
	if err != nil {
		return nil, err
	}
	w := &memResponse{header: http.Header{}, code: http.StatusOK}
	a.d.Handler().ServeHTTP(w, req)
	if w.code != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/routing: %d %s", w.code, bytes.TrimSpace(w.body.Bytes()))
	}
	var body routingBody
	if err := json.Unmarshal(w.body.Bytes(), &body); err != nil {
		return nil, fmt.Errorf("GET /v1/routing: %w", err)
	}
	names := make([]string, 0, len(body.Clusters))
	for name := range body.Clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]console.Routing, 0, len(names))
	for _, name := range names {
		c := body.Clusters[name]
		r := console.Routing{Cluster: name, Ready: c.Ready, Version: c.Version, AgeSeconds: c.AgeSeconds,
			Stale: c.Stale, ShedFraction: c.ShedFraction, Weights: c.Weights, ShedTotal: c.ShedTotal, RefusedTotal: c.RefusedTotal,
			Classes: c.Classes}
		for _, e := range c.Engines {
			r.Engines = append(r.Engines, console.RoutedEngine{Name: e.Name, Available: e.Available,
				Reason: e.Reason, InFlight: e.InFlight, Picks: e.Picks})
		}
		out = append(out, r)
	}
	return out, nil
}

// memResponse is an in-memory http.ResponseWriter.
type memResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
	wrote  bool
}

func (m *memResponse) Header() http.Header { return m.header }

func (m *memResponse) WriteHeader(code int) {
	if !m.wrote {
		m.code, m.wrote = code, true
	}
}

func (m *memResponse) Write(b []byte) (int, error) {
	m.WriteHeader(http.StatusOK)
	return m.body.Write(b)
}

// aggregatorEngines is the aggregator's latest window, engine rows.
type aggregatorEngines struct{ a *aggregator.Aggregator }

func (a aggregatorEngines) Engines(context.Context) ([]console.EngineStats, error) {
	v := a.a.Features()
	if v == nil {
		return nil, nil
	}
	var out []console.EngineStats
	for _, r := range v.Rows {
		if r.Cluster != "" {
			continue // cluster-engine rows; the engine row has the totals
		}
		out = append(out, console.EngineStats{Name: r.Engine, Requests: int64(r.Requests), LoadRPS: r.ArrivalRPS, InFlight: r.InFlight,
			TTFTP50Ms: r.TTFTP50Ms, TTFTP99Ms: r.TTFTP99Ms, TBOTP50Ms: r.TBOTP50Ms, TBOTP99Ms: r.TBOTP99Ms, CacheHitRatio: r.CacheHitRatio,
			Utilization: r.Utilization, Healthy: r.Healthy, WindowEnd: v.WindowEnd})
	}
	return out, nil
}

// trafficSource is the traffic generator's counters.
type trafficSource struct{ d *devFleet }

func (a trafficSource) Traffic(context.Context) ([]console.TrafficCluster, error) {
	st := a.d.gen.Stats()
	out := make([]console.TrafficCluster, 0, len(st.Clusters))
	for _, c := range st.Clusters {
		out = append(out, console.TrafficCluster{Cluster: c.Cluster, DemandRPS: c.DemandRPS, Multiplier: c.Multiplier,
			Sent: c.Sent, OK: c.OK, Good: c.Good, Shed: c.Shed, Errors: c.Errors, Dropped: c.Dropped, InFlight: c.InFlight,
			LatencyP50Ms: c.LatencyMs.P50, LatencyP99Ms: c.LatencyMs.P99, TTFTP50Ms: c.TTFTMs.P50, TTFTP99Ms: c.TTFTMs.P99,
			TBOTP50Ms: c.TBOTMs.P50, TBOTP99Ms: c.TBOTMs.P99,
			PromptTokens: c.PromptTokens, CachedTokens: c.CachedTokens, FollowUps: c.FollowUps, SameEngine: c.SameEngine})
	}
	return out, nil
}
