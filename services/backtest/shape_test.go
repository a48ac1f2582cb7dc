package backtest

import (
	"strings"
	"testing"
	"time"
)

func TestParseSwingAndFailure(t *testing.T) {
	sw, err := ParseSwing("cluster=fe-east,factor=2.5,from=60s,to=5m")
	if err != nil || sw != (Swing{Cluster: "fe-east", Factor: 2.5, From: time.Minute, To: 5 * time.Minute}) {
		t.Fatalf("%+v %v", sw, err)
	}
	fl, err := ParseFailure("engine=e1,at=120,for=1m")
	if err != nil || fl != (Failure{Engine: "e1", At: 2 * time.Minute, For: time.Minute}) {
		t.Fatalf("%+v %v", fl, err)
	}
	if fl, err := ParseFailure("at=2s,engine=e1"); err != nil || fl.For != 0 {
		t.Fatalf("%+v %v", fl, err)
	}
	for _, bad := range []string{
		"cluster=a,factor=2,from=10s", "cluster=a,factor=-1,from=0s,to=1s", "cluster=a,factor=2,from=5s,to=1s",
		"cluster=a,factor=2,from=0s,to=1s,extra=1", "cluster=a,cluster=b,factor=2,from=0s,to=1s", "cluster=a factor=2",
		"cluster=a,factor=NaN,from=0s,to=1s", "cluster=a,factor=2,from=-3s,to=1s",
	} {
		if _, err := ParseSwing(bad); err == nil {
			t.Errorf("ParseSwing(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"engine=e1", "engine=e1,at=1s,for=0s", "at=1s", "engine=e1,at=soon"} {
		if _, err := ParseFailure(bad); err == nil {
			t.Errorf("ParseFailure(%q) accepted", bad)
		}
	}
}

func TestSwing(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	// 100 one-turn conversations, one every 100 ms, alternating clusters:
	// fe-a's requests are at 0, 0.2, ..., 9.8 s.
	tr := synthetic(100, 1, 100*time.Millisecond, 5)
	inWindow := 0
	for _, r := range tr.Requests {
		if r.Cluster == "fe-a" && r.ArrivalNs >= int64(2*time.Second) && r.ArrivalNs < int64(6*time.Second) {
			inWindow++
		}
	}
	for _, tc := range []struct {
		factor          float64
		copies, dropped int
	}{{3, 2 * inWindow, 0}, {1, 0, 0}, {0, 0, inWindow}} {
		cfg := DefaultConfig()
		cfg.Fleet = f
		cfg.Swings = []Swing{{Cluster: "fe-a", Factor: tc.factor, From: 2 * time.Second, To: 6 * time.Second}}
		b, err := New(cfg, synthetic(100, 1, 100*time.Millisecond, 5))
		if err != nil {
			t.Fatal(err)
		}
		s := b.Summary()
		if s.SwingCopies != tc.copies || s.SwingDropped != tc.dropped || s.Requests != 100+tc.copies-tc.dropped {
			t.Errorf("factor %v: %+v, want %d copies and %d dropped", tc.factor, s, tc.copies, tc.dropped)
		}
		if s.Conversations != s.Requests {
			t.Errorf("factor %v: copies share conversations: %+v", tc.factor, s)
		}
	}
}

func TestSwingKeepsConversationsWhole(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	tr := synthetic(400, 4, 10*time.Millisecond, 5) // turns 4 s apart
	cfg := DefaultConfig()
	cfg.Fleet = f
	cfg.Swings = []Swing{{Cluster: "fe-b", Factor: 1.5, From: 0, To: time.Hour}}
	b, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	turns := map[string]int{}
	for c := range b.w.len() {
		turns[b.w.convKey[b.w.conv[c]]]++
	}
	copies := 0
	for k, n := range turns {
		if n != 4 {
			t.Fatalf("conversation %s has %d turns after the swing, want 4", k, n)
		}
		if strings.Contains(k, "#") {
			copies++
		}
	}
	if copies < 70 || copies > 130 { // half of fe-b's 200 conversations, ± sampling
		t.Fatalf("%d copied conversations, want about 100", copies)
	}
}

func TestNewRejects(t *testing.T) {
	f := parseFleet(t, twoRegionFleet)
	tr := func() *Trace { return synthetic(10, 1, time.Second, 5) }
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		msg    string
	}{
		{"no fleet", func(c *Config) { c.Fleet = nil }, "no fleet"},
		{"speed", func(c *Config) { c.Speed = 0 }, "speed"},
		{"policy", func(c *Config) { c.Policies = []string{"magic"} }, "unknown policy"},
		{"hop", func(c *Config) { c.WindowHop = 3 * time.Second }, "multiple"},
		{"fail engine", func(c *Config) { c.Failures = []Failure{{Engine: "nope", At: time.Second}} }, "nope"},
		{"swing cluster", func(c *Config) { c.Swings = []Swing{{Cluster: "nope", Factor: 2, To: time.Second}} }, "nope"},
		{"pid", func(c *Config) { c.PID.Alpha = 0 }, "alpha"},
		{"spill", func(c *Config) { c.Optimizer.SpillFactor = 0.5 }, "spill"},
		{"all dropped", func(c *Config) {
			c.Swings = []Swing{{Cluster: "fe-a", To: time.Hour}, {Cluster: "fe-b", To: time.Hour}}
		}, "no requests left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Fleet = f
			tc.mutate(&cfg)
			if _, err := New(cfg, tr()); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %q", err, tc.msg)
			}
		})
	}
	bad := tr()
	bad.Requests[3].Cluster = "fe-zz"
	cfg := DefaultConfig()
	cfg.Fleet = f
	if _, err := New(cfg, bad); err == nil || !strings.Contains(err.Error(), "fe-zz") {
		t.Fatalf("unknown cluster: %v", err)
	}
}
