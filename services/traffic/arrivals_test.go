package traffic

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func plan(cfg *Config, i int, horizon time.Duration) ([]time.Duration, []Script) {
	shares := 0.0
	for _, c := range cfg.Clusters {
		shares += c.DemandShare
	}
	p := newArrivalProcess(cfg, i, cfg.TotalDemandRPS*cfg.Clusters[i].DemandShare/shares)
	var at []time.Duration
	var scripts []Script
	for {
		t, s, ok := p.next()
		if !ok || t > horizon {
			return at, scripts
		}
		at = append(at, t)
		scripts = append(scripts, s)
	}
}

func TestArrivalsDeterministicGivenSeed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Swings = []Swing{{"fe-east", 3, time.Minute, 2 * time.Minute, 3 * time.Minute}}
	a1, s1 := plan(&cfg, 0, 10*time.Minute)
	a2, s2 := plan(&cfg, 0, 10*time.Minute)
	if len(a1) == 0 || !reflect.DeepEqual(a1, a2) || !reflect.DeepEqual(s1, s2) {
		t.Fatalf("same seed gave different arrivals (%d vs %d)", len(a1), len(a2))
	}
	cfg.Seed = 2
	a3, _ := plan(&cfg, 0, 10*time.Minute)
	if reflect.DeepEqual(a1, a3) {
		t.Fatal("a different seed gave the same arrivals")
	}
	// Clusters draw from separate streams.
	b, _ := plan(&cfg, 1, 10*time.Minute)
	if len(b) > 0 && len(a3) > 0 && a3[0] == b[0] {
		t.Fatal("two clusters share an arrival stream")
	}
}

// TestArrivalRateFollowsSwing checks the Poisson process's rate inside and
// outside the swing windows over a long horizon: request rate = demand ×
// share × factor, conversations at that over the mean turns.
func TestArrivalRateFollowsSwing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TotalDemandRPS = 40
	cfg.Clusters = []Cluster{{Name: "a", DemandShare: 0.75}, {Name: "b", DemandShare: 0.25}}
	cfg.Swings = []Swing{{"a", 3, time.Minute, 2 * time.Minute, 4 * time.Minute}, {"b", 0, 0, time.Hour, 0}}
	const hours = 4
	at, _ := plan(&cfg, 0, hours*time.Hour)
	in, out := 0, 0
	for _, x := range at {
		if Multiplier(cfg.Swings, "a", x) == 3 {
			in++
		} else {
			out++
		}
	}
	base := 40 * 0.75 / cfg.MeanTurns // conversations per second
	// A quarter of the time is inside the window.
	wantIn, wantOut := base*3*hours*900, base*hours*2700
	for _, c := range []struct {
		what      string
		got, want float64
	}{{"inside the swing", float64(in), wantIn}, {"outside", float64(out), wantOut}} {
		// Poisson: 5 standard deviations.
		if math.Abs(c.got-c.want) > 5*math.Sqrt(c.want) {
			t.Errorf("arrivals %s = %.0f, want %.0f ± %.0f", c.what, c.got, c.want, 5*math.Sqrt(c.want))
		}
	}
	if b, _ := plan(&cfg, 1, time.Hour); len(b) != 0 {
		t.Errorf("cluster b with factor 0 for an hour got %d arrivals", len(b))
	}
}
