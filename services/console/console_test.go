package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// played returns a console that has sampled the fake fleet for steps
// seconds.
func played(t *testing.T, steps int, mod func(*Config)) (*Console, *fakeFleet) {
	t.Helper()
	start := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	f := newFakeFleet(start)
	cfg := DefaultConfig(f.fleet)
	cfg.Links = []Link{{Name: "kafka", URL: "127.0.0.1:9092", Hint: "kcat -b 127.0.0.1:9092 -C -t ilb.signals"}}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg, f.sources())
	if err != nil {
		t.Fatal(err)
	}
	c.started = start
	for f.step = 0; f.step < steps; f.step++ {
		c.sampleAndPublish(t.Context(), start.Add(time.Duration(f.step)*time.Second))
	}
	f.step--
	return c, f
}

func getState(t *testing.T, h http.Handler) State {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/state", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/state: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var st State
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("decode state: %v", err)
	}
	return st
}

func TestStateFromSources(t *testing.T) {
	c, f := played(t, 120, nil)
	st := getState(t, c.Handler())
	if st.Samples != 120 || st.UptimeSeconds != 119 {
		t.Fatalf("samples %d uptime %v, want 120 and 119", st.Samples, st.UptimeSeconds)
	}
	if len(st.Engines) != len(f.fleet.Engines) || len(st.Clusters) != len(f.fleet.Clusters) {
		t.Fatalf("%d engines, %d clusters", len(st.Engines), len(st.Clusters))
	}
	for i, e := range f.fleet.Engines {
		if st.Engines[i].Name != e.Name || st.Engines[i].Color == "" || st.Engines[i].Stats == nil {
			t.Fatalf("engine %d = %+v, want %s in fleet order with colour and stats", i, st.Engines[i], e.Name)
		}
	}
	if st.Engines[0].Stats.CacheHitRatio != 0 {
		t.Errorf("NaN cache hit ratio came out as %v, want 0", st.Engines[0].Stats.CacheHitRatio)
	}
	// Each engine of fe-east has 2 picks more per second, 3 in flight.
	if e := st.Engines[0]; e.PickRPS != 4 || e.InFlight != 6 {
		t.Errorf("east-h100-0 (used by fe-east and fe-west): %v picks/s, %d in flight; want 4 and 6", e.PickRPS, e.InFlight)
	}
	east := st.Clusters[0]
	if east.Name != "fe-east" || east.Routing == nil || east.Plan == nil || east.Traffic == nil {
		t.Fatalf("fe-east view %+v lacks a source", east)
	}
	if east.SentRPS != 10 || east.OKRPS != 9 || east.ShedRPS != 1 || east.CacheHitRatio != 0.6 || east.SameEngineRatio != 0.75 {
		t.Errorf("fe-east rates sent %v ok %v shed %v, cache %v, same %v; want 10, 9, 1, 0.6, 0.75",
			east.SentRPS, east.OKRPS, east.ShedRPS, east.CacheHitRatio, east.SameEngineRatio)
	}
	if st.Traffic == nil || st.Traffic.SentRPS != 30 || st.Traffic.Sent != 3*10*119 {
		t.Errorf("traffic totals %+v, want 30 rps and %d sent", st.Traffic, 3*10*119)
	}
	if st.Optimizer == nil || st.Optimizer.Version != 24 || st.Optimizer.AgeSeconds != 4 {
		t.Errorf("optimizer %+v, want version 24 solved 4 s ago", st.Optimizer)
	}
	if len(st.Links) != 1 || st.Errors != nil {
		t.Errorf("links %v errors %v", st.Links, st.Errors)
	}
}

func TestHistoryFollowsWeights(t *testing.T) {
	c, f := played(t, 120, nil)
	st := getState(t, c.Handler())
	h := st.History
	if len(h.T) != 120 || h.T[1]-h.T[0] != 1000 {
		t.Fatalf("history has %d samples, step %d ms", len(h.T), h.T[1]-h.T[0])
	}
	eu := -1
	for i, e := range st.Engines {
		if e.Name == "eu-h100-0" {
			eu = i
		}
	}
	east := h.Clusters[0]
	for _, k := range []int{0, 59, 75, 100, 119} {
		f.step = k
		want, shed := f.weights("fe-east")
		if got := east.Weights[eu][k]; got != round4(want["eu-h100-0"]) || east.Shed[k] != round4(shed) {
			t.Errorf("sample %d: eu-h100-0 weight %v shed %v, want %v and %v", k, got, east.Shed[k], round4(want["eu-h100-0"]), round4(shed))
		}
	}
	if east.Multiplier[59] != 1 || east.Multiplier[60] != 2 || east.DemandRPS[60] != round4(12*0.45*2) {
		t.Errorf("multiplier %v→%v, demand %v at the swing", east.Multiplier[59], east.Multiplier[60], east.DemandRPS[60])
	}
	if east.SentRPS[0] != 0 || east.SentRPS[1] != 10 {
		t.Errorf("sent rps series starts %v, want 0 (no previous sample) then 10", east.SentRPS[:2])
	}
	if len(h.EngineLoadRPS) != len(st.Engines) || len(h.EngineLoadRPS[0]) != 120 {
		t.Errorf("engine load history shape %d×%d", len(h.EngineLoadRPS), len(h.EngineLoadRPS[0]))
	}
}

func TestHistoryKeepsNewest(t *testing.T) {
	c, _ := played(t, 7, func(cfg *Config) { cfg.HistoryPoints = 3 })
	h := getState(t, c.Handler()).History
	if len(h.T) != 3 || h.T[0] != time.Date(2026, 11, 29, 22, 0, 4, 0, time.UTC).UnixMilli() || h.T[2]-h.T[0] != 2000 {
		t.Fatalf("history t = %v, want the last 3 samples oldest first", h.T)
	}
	if v := h.Clusters[0].Version; len(v) != 3 || v[2] != 2 {
		t.Fatalf("versions %v, want 3 ending with 2", v)
	}
}

func TestFailingSourceShowsErrorAndRatesSpanTheGap(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFakeFleet(start)
	c, err := New(DefaultConfig(f.fleet), f.sources())
	if err != nil {
		t.Fatal(err)
	}
	f.step = 10
	c.sampleAndPublish(t.Context(), start)
	f.failOpt = true
	c.src.Traffic = nil // and traffic goes missing for a while
	f.step = 40
	c.sampleAndPublish(t.Context(), start.Add(30*time.Second))
	st := getState(t, c.Handler())
	if st.Errors["optimizer"] != "optimizer down" || st.Optimizer != nil || st.Clusters[0].Routing == nil {
		t.Fatalf("errors %v, optimizer %+v: want the error shown and the other sources kept", st.Errors, st.Optimizer)
	}
	c.src.Traffic = f
	f.step = 41
	c.sampleAndPublish(t.Context(), start.Add(31*time.Second))
	st = getState(t, c.Handler())
	// 31 steps × 10 sent over 31 s since the last good traffic sample.
	if got := st.Clusters[0].SentRPS; got != 10 {
		t.Fatalf("sent rate after the gap %v, want 10", got)
	}
}

func TestHandler(t *testing.T) {
	c, _ := played(t, 2, nil)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	get := func(method, path string) (int, string, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	code, ct, body := get("GET", "/")
	if code != 200 || !strings.HasPrefix(ct, "text/html") || !strings.Contains(body, `fetch("/api/state"`) {
		t.Fatalf("GET /: %d %s", code, ct)
	}
	if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Fatal("the page references an outside URL; it must work offline")
	}
	if code, _, _ := get("POST", "/"); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST / = %d, want 405", code)
	}
	if code, _, _ := get("GET", "/nope"); code != http.StatusNotFound {
		t.Fatalf("GET /nope = %d, want 404", code)
	}
	if code, _, body := get("GET", "/api/state"); code != 200 || !strings.Contains(body, `"fe-east"`) {
		t.Fatalf("GET /api/state = %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestEmptyStateBeforeRun(t *testing.T) {
	c, err := New(DefaultConfig(schemas.ExampleFleet()), Sources{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples != 0 || len(st.Clusters) != 3 || len(st.History.T) != 0 || st.Links == nil {
		t.Fatalf("empty state %+v", st)
	}
}

func TestRunSamplesUntilCancelled(t *testing.T) {
	f := newFakeFleet(time.Now())
	cfg := DefaultConfig(f.fleet)
	cfg.SampleInterval = 10 * time.Millisecond
	c, err := New(cfg, f.sources())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := c.State()
		if st.Samples >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run took no 3 samples in 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestEngineColorsByRegion(t *testing.T) {
	f := schemas.ExampleFleet()
	a, b := engineColors(f), engineColors(f)
	fam := func(color string) int {
		for i, fm := range families {
			for _, c := range fm {
				if c == color {
					return i
				}
			}
		}
		return -1
	}
	for _, e := range f.Engines {
		if a[e.Name] != b[e.Name] || fam(a[e.Name]) < 0 {
			t.Fatalf("%s: colour %q not stable or not from a family", e.Name, a[e.Name])
		}
		for _, o := range f.Engines {
			sameFam := fam(a[e.Name]) == fam(a[o.Name])
			if sameFam != (e.Region == o.Region) {
				t.Fatalf("%s (%s) and %s (%s): same family %v", e.Name, e.Region, o.Name, o.Region, sameFam)
			}
			if e.Name != o.Name && a[e.Name] == a[o.Name] {
				t.Fatalf("%s and %s share colour %s", e.Name, o.Name, a[e.Name])
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"fleet", func(c *Config) { c.Fleet = nil }, "no fleet"},
		{"empty fleet", func(c *Config) { c.Fleet = &schemas.Fleet{} }, "no clusters"},
		{"interval", func(c *Config) { c.SampleInterval = time.Millisecond }, "sample interval"},
		{"history", func(c *Config) { c.HistoryPoints = 1 }, "history points"},
		{"history max", func(c *Config) { c.HistoryPoints = maxHistoryPoints + 1 }, "history points"},
		{"timeout", func(c *Config) { c.SourceTimeout = 0 }, "source timeout"},
	}
	for _, c := range cases {
		cfg := DefaultConfig(schemas.ExampleFleet())
		c.mod(&cfg)
		if _, err := New(cfg, Sources{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

func TestMissingEngineKeepsLastStats(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFakeFleet(start)
	c, err := New(DefaultConfig(f.fleet), f.sources())
	if err != nil {
		t.Fatal(err)
	}
	f.step = 70
	c.sampleAndPublish(t.Context(), start)
	want := getState(t, c.Handler()).Engines[1].Stats
	f.onlyFirst, f.step = true, 200
	c.sampleAndPublish(t.Context(), start.Add(30*time.Second))
	st := getState(t, c.Handler())
	if got := st.Engines[1].Stats; got == nil || *got != *want {
		t.Fatalf("engine missing from the read 30 s later: stats %+v, want the last ones %+v", got, want)
	}
	if got := st.Engines[0].Stats; got == nil || !got.WindowEnd.Equal(start.Add(200*time.Second)) {
		t.Fatalf("engine in the read: stats %+v, want the new ones", got)
	}
	c.sampleAndPublish(t.Context(), start.Add(31*time.Second))
	if st := getState(t, c.Handler()); st.Engines[1].Stats != nil || st.History.EngineLoadRPS[1][2] != 0 {
		t.Fatalf("after the TTL the engine still shows %+v", st.Engines[1].Stats)
	}
}

// SetFleet: the next sample shows the new fleet's engines, an added one
// with a colour and a zero history, a removed one gone, and the history
// of the engines both fleets list kept.
func TestSetFleetRemapsTheHistory(t *testing.T) {
	c, f := played(t, 90, nil)
	before := getState(t, c.Handler())
	next := *f.fleet
	next.Engines = nil
	for _, e := range f.fleet.Engines {
		if e.Name != "east-a100-0" {
			next.Engines = append(next.Engines, e)
		}
	}
	added := next.Engines[0]
	added.Name = "east-h100-9"
	next.Engines = append(next.Engines, added)
	c.SetFleet(&next)
	f.step = 90
	c.sampleAndPublish(t.Context(), f.start.Add(90*time.Second))
	st := getState(t, c.Handler())
	index := func(st State, name string) int {
		for i, e := range st.Engines {
			if e.Name == name {
				return i
			}
		}
		return -1
	}
	if index(st, "east-a100-0") >= 0 || index(st, "east-h100-9") != len(st.Engines)-1 || len(st.Engines) != len(f.fleet.Engines) {
		t.Fatalf("engines after the change: %+v", st.Engines)
	}
	if st.Engines[len(st.Engines)-1].Color == "" {
		t.Error("the added engine has no colour")
	}
	eu, euBefore := index(st, "eu-h100-0"), index(before, "eu-h100-0")
	got, want := st.History.Clusters[0].Weights[eu], before.History.Clusters[0].Weights[euBefore]
	if len(got) != 91 || got[75] != want[75] || got[89] != want[89] || got[75] == 0 {
		t.Fatalf("eu-h100-0's fe-east weights not kept: %v..., want %v...", got[70:80], want[70:80])
	}
	h9 := st.History.Clusters[0].Weights[len(st.Engines)-1]
	if h9[0] != 0 || h9[89] != 0 || len(st.History.EngineLoadRPS[len(st.Engines)-1]) != 91 {
		t.Fatalf("the added engine's history: %v", h9[80:])
	}
}
