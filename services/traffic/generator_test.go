package traffic

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func testConfig(plane *fakePlane) Config {
	cfg := DefaultConfig()
	cfg.BaseURL = "http://plane.test"
	cfg.Transport = pipeTransport{plane}
	cfg.Clusters = []Cluster{{Name: "fe-a", DemandShare: 0.6}, {Name: "fe-b", DemandShare: 0.3}, {Name: "fe-shed", DemandShare: 0.1}}
	cfg.TotalDemandRPS = 10
	cfg.FirstMessageTokens, cfg.MessageTokens = 60, 20 // small bodies: the test measures counts
	return cfg
}

// runFor runs g for d of (virtual) time, waits until every goroutine is
// blocked, and returns the stats taken then, and Run's error after cancel.
func runFor(t *testing.T, g *Generator, d time.Duration) Stats {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	time.Sleep(d)
	synctest.Wait()
	st := g.Stats()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	return st
}

func TestGeneratorPlaysConversations(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "plain"}[stream], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkConversations(t, stream) })
		})
	}
}

func checkConversations(t *testing.T, stream bool) {
	plane := newFakePlane()
	plane.shed["fe-shed"] = true
	cfg := testConfig(plane)
	cfg.Stream = stream
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const minutes = 6
	st := runFor(t, g, minutes*time.Minute)
	if len(plane.violations) > 0 {
		t.Fatalf("%d protocol violations, first: %s", len(plane.violations), plane.violations[0])
	}
	a, shed, tot := st.Clusters[0], st.Clusters[2], st.Total
	if tot.Sent != tot.OK+tot.Shed+tot.Errors+tot.InFlight {
		t.Errorf("sent %d != ok %d + shed %d + errors %d + in flight %d", tot.Sent, tot.OK, tot.Shed, tot.Errors, tot.InFlight)
	}
	if tot.Errors != 0 || tot.Dropped != 0 {
		t.Errorf("errors %d, dropped %d: want none", tot.Errors, tot.Dropped)
	}
	// fe-a: 60% of 10 rps. Conversations are whole (about 540 of them, 4
	// turns each, geometric) and the first think times ramp the rate up:
	// allow 15%, about 2.5 standard deviations.
	if rate := float64(a.Sent) / (minutes * 60); math.Abs(rate-6)/6 > 0.15 {
		t.Errorf("fe-a sent %.2f rps, want about 6", rate)
	}
	if shed.OK != 0 || shed.Shed == 0 || shed.Shed != shed.Conversations-shed.ActiveConversations {
		t.Errorf("fe-shed: ok %d, shed %d, conversations %d (%d live): want every conversation to end at its first 429",
			shed.OK, shed.Shed, shed.Conversations, shed.ActiveConversations)
	}
	if a.FollowUps == 0 || a.SameEngine != a.FollowUps {
		t.Errorf("fe-a: %d of %d follow-ups on the previous engine; the fake is sticky, want all", a.SameEngine, a.FollowUps)
	}
	var byEngine int64
	for _, n := range tot.Engines {
		byEngine += n
	}
	if byEngine != tot.OK || len(tot.Engines) != 3 {
		t.Errorf("engines %v sum to %d, want %d over 3 engines", tot.Engines, byEngine, tot.OK)
	}
	if tot.PromptTokens != int64(plane.prompt) || tot.CachedTokens != int64(plane.cached) {
		t.Errorf("usage: prompt %d cached %d, the plane reported %d and %d", tot.PromptTokens, tot.CachedTokens, plane.prompt, plane.cached)
	}
	// Virtual time makes the latencies exact.
	if a.LatencyMs.P50 != 150 || a.LatencyMs.P99 != 150 {
		t.Errorf("latency %+v, want 150 ms exactly", a.LatencyMs)
	}
	wantTTFT := 0.0
	if stream {
		wantTTFT = 100
	}
	if a.TTFTMs.P50 != wantTTFT {
		t.Errorf("ttft %+v, want %v ms", a.TTFTMs, wantTTFT)
	}
	// The default SLO (2 s, 100 ms) holds every streamed answer of the
	// fake; an answer that was not streamed is never judged good.
	if wantGood := map[bool]int64{true: tot.OK, false: 0}[stream]; tot.Good != wantGood {
		t.Errorf("good %d of %d answered, want %d", tot.Good, tot.OK, wantGood)
	}
}

func TestGeneratorSwingRaisesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plane := newFakePlane()
		cfg := testConfig(plane)
		cfg.Swings = []Swing{{"fe-b", 4, 2 * time.Minute, 4 * time.Minute, 0}}
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		before := g.Stats().Clusters[1]
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		during := g.Stats().Clusters[1]
		cancel()
		<-done
		if before.Multiplier != 4 || during.Multiplier != 1 {
			// From is inclusive, To exclusive.
			t.Errorf("multipliers %v, %v at 2 and 4 minutes, want 4 and 1", before.Multiplier, during.Multiplier)
		}
		if math.Abs(during.DemandRPS-3) > 1e-9 {
			t.Errorf("fe-b demand %v rps after the swing, want 3", during.DemandRPS)
		}
		b1, b2 := float64(before.Sent), float64(during.Sent-before.Sent)
		if b2 < 2.5*b1 {
			t.Errorf("fe-b sent %.0f before the ×4 swing and %.0f during it: want at least 2.5× more", b1, b2)
		}
	})
}

func TestGeneratorDropsWhenSaturated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plane := newFakePlane()
		plane.block = make(chan struct{}) // never answers
		cfg := testConfig(plane)
		cfg.MaxInFlight = 2
		cfg.MaxConversations = 5
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := runFor(t, g, time.Minute)
		if st.Total.InFlight != 2 || st.Total.Sent != 2 {
			t.Errorf("in flight %d, sent %d: want the bound of 2", st.Total.InFlight, st.Total.Sent)
		}
		if st.Total.ActiveConversations > 5 || st.Total.Dropped < 50 {
			t.Errorf("%d live conversations, %d dropped: want at most 5 live and the rest dropped", st.Total.ActiveConversations, st.Total.Dropped)
		}
	})
}

// TestGeneratorOverHTTP runs the generator against a real HTTP server for
// a moment: real sockets, real SSE framing, and a clean stop.
func TestGeneratorOverHTTP(t *testing.T) {
	plane := newFakePlane()
	plane.firstByte, plane.rest = time.Millisecond, time.Millisecond
	srv := httptest.NewServer(plane)
	defer srv.Close()
	cfg := testConfig(plane)
	cfg.Transport = nil
	cfg.BaseURL = srv.URL + "/"
	cfg.TotalDemandRPS = 200
	cfg.MeanThink = 10 * time.Millisecond
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st := g.Stats()
	if st.Total.OK < 50 || st.Total.FollowUps == 0 || st.Total.TTFTMs.N == 0 {
		t.Fatalf("over HTTP: ok %d, follow-ups %d, ttft samples %d", st.Total.OK, st.Total.FollowUps, st.Total.TTFTMs.N)
	}
	if len(plane.violations) > 0 {
		t.Fatalf("violation: %s", plane.violations[0])
	}
	if err := g.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Run = %v, want an error", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"url", func(c *Config) { c.BaseURL = "127.0.0.1:8080" }, "base URL"},
		{"no clusters", func(c *Config) { c.Clusters = nil }, "no cluster"},
		{"dup", func(c *Config) { c.Clusters = append(c.Clusters, c.Clusters[0]) }, "twice"},
		{"bad name", func(c *Config) { c.Clusters[0].Name = "a b" }, "contains"},
		{"share", func(c *Config) { c.Clusters[0].DemandShare = math.NaN() }, "demand share"},
		{"zero shares", func(c *Config) { c.Clusters = []Cluster{{Name: "a", DemandShare: 0}} }, "sum to 0"},
		{"rate", func(c *Config) { c.TotalDemandRPS = 0 }, "total demand"},
		{"swing cluster", func(c *Config) { c.Swings = []Swing{{"nope", 2, 0, time.Second, 0}} }, "unknown cluster"},
		{"swing window", func(c *Config) { c.Swings = []Swing{{"fe-east", 2, time.Second, 0, 0}} }, "FROM < TO"},
		{"turns", func(c *Config) { c.MeanTurns = 0.5 }, "mean turns"},
		{"max turns", func(c *Config) { c.MaxTurns = 0 }, "max turns"},
		{"tokens", func(c *Config) { c.MessageTokens = 0 }, "message tokens"},
		{"max_tokens", func(c *Config) { c.MeanMaxTokens = 0 }, "max_tokens"},
		{"think", func(c *Config) { c.MeanThink = -1 }, "think"},
		{"in flight", func(c *Config) { c.MaxInFlight = 0 }, "in flight"},
		{"timeout", func(c *Config) { c.RequestTimeout = 0 }, "timeout"},
		{"samples", func(c *Config) { c.LatencySamples = 0 }, "samples"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want it to mention %q", c.name, err, c.want)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted an invalid config", c.name)
		}
	}
}

func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n")
	f.Add("data: nope\n")
	f.Add(": comment\nevent: x\ndata:[DONE]")
	f.Fuzz(func(t *testing.T, in string) {
		var r result
		err := readStream(strings.NewReader(in), &r, time.Now())
		if err == nil && !strings.Contains(in, "[DONE]") {
			t.Fatalf("stream without [DONE] accepted: %q", in)
		}
	})
}
