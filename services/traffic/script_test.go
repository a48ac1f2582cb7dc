package traffic

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

func TestScriptShape(t *testing.T) {
	cfg := DefaultConfig()
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 20000
	turns, first, later, maxTok := 0, 0, 0, 0
	var think time.Duration
	for i := range n {
		s := newScript(&cfg, "fe-east", uint64(i), rng)
		if len(s.Turns) < 1 || len(s.Turns) > cfg.MaxTurns {
			t.Fatalf("script with %d turns", len(s.Turns))
		}
		turns += len(s.Turns)
		first += s.Turns[0].UserTokens
		if s.Turns[0].Think != 0 {
			t.Fatal("first turn has a think time")
		}
		for j, tu := range s.Turns {
			if tu.UserTokens < 1 || tu.MaxTokens < 1 || tu.MaxTokens > 4*cfg.MeanMaxTokens {
				t.Fatalf("turn %+v out of bounds", tu)
			}
			maxTok += tu.MaxTokens
			if j > 0 {
				later++
				think += tu.Think
			}
		}
	}
	meanTurns := float64(turns) / n
	if math.Abs(meanTurns-cfg.MeanTurns) > 0.15 {
		t.Errorf("mean turns %.2f, want about %v", meanTurns, cfg.MeanTurns)
	}
	// Clamping to [mean/8, 4 mean] keeps means within ~10% of the target.
	within := func(what string, got, want float64) {
		if math.Abs(got-want)/want > 0.1 {
			t.Errorf("%s mean %.1f, want within 10%% of %.1f", what, got, want)
		}
	}
	within("first message tokens", float64(first)/n, float64(cfg.FirstMessageTokens))
	within("max_tokens", float64(maxTok)/float64(turns), float64(cfg.MeanMaxTokens))
	within("think seconds", (think / time.Duration(later)).Seconds(), cfg.MeanThink.Seconds())
}

func TestUserMessageDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	a := newScript(&cfg, "fe-eu", 1, rand.New(rand.NewPCG(1, 2)))
	b := newScript(&cfg, "fe-eu", 1, rand.New(rand.NewPCG(1, 2)))
	c := newScript(&cfg, "fe-eu", 2, rand.New(rand.NewPCG(1, 3)))
	if a.ID != b.ID || a.UserMessage(0) != b.UserMessage(0) {
		t.Fatal("same seed gave different scripts")
	}
	if a.ID == c.ID || a.UserMessage(0) == c.UserMessage(0) {
		t.Fatal("different seeds gave the same first message")
	}
	for i := range a.Turns {
		m := a.UserMessage(i)
		if len(m) != a.Turns[i].UserTokens*bytesPerToken {
			t.Fatalf("turn %d message is %d bytes, want %d", i, len(m), a.Turns[i].UserTokens*bytesPerToken)
		}
		if strings.ContainsAny(m, "\n\"\\") {
			t.Fatalf("message has characters needing escapes: %q", m[:40])
		}
	}
	if !strings.HasPrefix(a.ID, "fe-eu-000001-") {
		t.Fatalf("conversation id %q does not name its cluster and number", a.ID)
	}
}

func TestGeometric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	if got := geometric(rng, 1, 10); got != 1 {
		t.Fatalf("geometric mean 1 = %d, want 1", got)
	}
	for range 1000 {
		if n := geometric(rng, 50, 3); n < 1 || n > 3 {
			t.Fatalf("geometric capped at 3 gave %d", n)
		}
	}
}

// TestScriptModels: a cluster's conversations name its models by share
// (the example fleet's mix), the same conversation draws the same model,
// and a cluster without a mix names none (the placeholder model).
func TestScriptModels(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clusters = ClustersOf(schemas.ExampleFleet())
	mix := cfg.Clusters[0].Models
	if len(mix) < 2 {
		t.Fatalf("the example fleet's %s has model mix %v, want two models", cfg.Clusters[0].Name, mix)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	counts := map[string]int{}
	const n = 20000
	for i := range n {
		counts[newScript(&cfg, cfg.Clusters[0].Name, uint64(i), rng).Model]++
	}
	for _, m := range mix {
		if got := float64(counts[m.Model]) / n; math.Abs(got-m.Share) > 0.02 {
			t.Errorf("model %s drawn %.3f of the time, want %.3f", m.Model, got, m.Share)
		}
	}
	a := newScript(&cfg, cfg.Clusters[0].Name, 1, rand.New(rand.NewPCG(1, 2)))
	b := newScript(&cfg, cfg.Clusters[0].Name, 1, rand.New(rand.NewPCG(1, 2)))
	if a.Model != b.Model || a.Model == "" {
		t.Fatalf("same seed, models %q and %q", a.Model, b.Model)
	}
	cfg.Clusters = []Cluster{{Name: "x", DemandShare: 1}}
	if s := newScript(&cfg, "x", 1, rng); s.Model != "" {
		t.Fatalf("no mix: model %q", s.Model)
	}
}
