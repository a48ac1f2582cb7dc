package console

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// fakeFleet plays a demand swing on the example fleet: at step k, fe-east
// moves weight from its own region to west-europe, as the optimizer would
// when its demand rises.
type fakeFleet struct {
	fleet   *schemas.Fleet
	step    int
	start   time.Time
	failOpt bool
	// onlyFirst makes Engines answer for the first engine only.
	onlyFirst bool
}

func newFakeFleet(start time.Time) *fakeFleet {
	return &fakeFleet{fleet: schemas.ExampleFleet(), start: start}
}

// shift is how far fe-east's weight has moved to Europe at step k: none
// before 60, all of the move by 90, back by 240.
func shift(k int) float64 {
	switch {
	case k < 60 || k >= 240:
		return 0
	case k < 90:
		return float64(k-60) / 30
	case k < 210:
		return 1
	default:
		return float64(240-k) / 30
	}
}

func (f *fakeFleet) weights(cluster string) (map[string]float64, float64) {
	s := shift(f.step)
	switch cluster {
	case "fe-east":
		return map[string]float64{"east-h100-0": 0.4 - 0.15*s, "east-h100-1": 0.4 - 0.15*s, "east-a100-0": 0.2 - 0.05*s,
			"eu-h100-0": 0.25 * s, "eu-a100-0": 0.05 * s}, 0.05 * s
	case "fe-west":
		return map[string]float64{"west-a100-0": 0.5, "east-h100-0": 0.25, "east-h100-1": 0.25}, 0
	default:
		return map[string]float64{"eu-h100-0": 0.65 - 0.1*s, "eu-a100-0": 0.35 + 0.1*s}, 0
	}
}

func (f *fakeFleet) Plan(context.Context) (Plan, error) {
	if f.failOpt {
		return Plan{}, errors.New("optimizer down")
	}
	p := Plan{Version: uint64(f.step/5 + 1), SolvedAt: f.start.Add(time.Duration(f.step/5*5) * time.Second),
		Solves: int64(f.step/5 + 1), ObjectiveMs: 4210.5, Status: "ok"}
	for _, c := range f.fleet.Clusters {
		w, shed := f.weights(c.Name)
		p.Clusters = append(p.Clusters, ClusterPlan{Cluster: c.Name, DemandRPS: 12 * c.DemandShare, ShedFraction: shed, Weights: w})
	}
	// Every engine is planned at half its capacity: TTFT 300 + 100·ρ/(1−ρ)
	// predicts 400 ms, TBOT 30 + 20·ρ 40 ms.
	for _, e := range f.fleet.Engines {
		p.Engines = append(p.Engines, EnginePlan{Name: e.Name, Profile: "prior", CapacityRPS: 4, LoadRPS: 2,
			PredictedTTFTMs: 400, PredictedTBOTMs: 40, TTFTBaseMs: 300, TTFTQueueMs: 100, TBOTBaseMs: 30, TBOTSlopeMs: 20})
	}
	return p, nil
}

func (f *fakeFleet) Routing(context.Context) ([]Routing, error) {
	var out []Routing
	for _, c := range f.fleet.Clusters {
		w, shed := f.weights(c.Name)
		r := Routing{Cluster: c.Name, Ready: true, Version: uint64(f.step/5 + 1), AgeSeconds: float64(f.step % 5),
			ShedFraction: shed, Weights: w, ShedTotal: 3 * int64(f.step), RefusedTotal: int64(f.step)}
		for _, e := range f.fleet.Engines {
			if w[e.Name] > 0 {
				r.Engines = append(r.Engines, RoutedEngine{Name: e.Name, Available: true, InFlight: 3, Picks: int64(f.step * 2)})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeFleet) Engines(context.Context) ([]EngineStats, error) {
	var out []EngineStats
	for i, e := range f.fleet.Engines {
		out = append(out, EngineStats{Name: e.Name, Requests: 10, LoadRPS: 1 + float64(i)/3 + shift(f.step)*float64(i%2),
			InFlight: 8, TTFTP50Ms: 300 + 40*float64(i), TTFTP99Ms: 900 + 150*float64(i), TBOTP50Ms: 35, TBOTP99Ms: 60,
			CacheHitRatio: 0.55 + 0.05*float64(i),
			Utilization:   0.4 + 0.09*float64(i), Healthy: i != 3, WindowEnd: f.start.Add(time.Duration(f.step) * time.Second)})
	}
	out[0].CacheHitRatio = math.NaN() // one bad number must not blank the page
	if f.onlyFirst {
		out = out[:1]
	}
	return out, nil
}

func (f *fakeFleet) Traffic(context.Context) ([]TrafficCluster, error) {
	var out []TrafficCluster
	for _, c := range f.fleet.Clusters {
		m := 1.0
		if c.Name == "fe-east" && f.step >= 60 && f.step < 180 {
			m = 2
		}
		n := int64(f.step)
		out = append(out, TrafficCluster{Cluster: c.Name, DemandRPS: 12 * c.DemandShare * m, Multiplier: m,
			Sent: 10 * n, OK: 9 * n, Good: fakeGood(n), Shed: n, PromptTokens: 1000 * n, CachedTokens: 600 * n, FollowUps: 4 * n, SameEngine: 3 * n,
			LatencyP50Ms: 4000, LatencyP99Ms: 9000, TTFTP50Ms: 350, TTFTP99Ms: 1200})
	}
	return out, nil
}

// fakeGood is the answers within the SLO after n seconds: 8 a second,
// 5 during the swing (seconds 60 to 180).
func fakeGood(n int64) int64 { return 8*n - 3*max(0, min(n, 180)-60) }

func (f *fakeFleet) sources() Sources {
	return Sources{Plan: f, Routing: f, Engines: f, Traffic: f}
}
