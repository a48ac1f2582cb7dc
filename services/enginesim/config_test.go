package enginesim

import (
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/engine"
)

func TestParamsFillZerosFromTheSKU(t *testing.T) {
	f := &schemas.Fleet{BlockTokens: 0}
	got, err := Params(f, schemas.FleetEngine{Name: "e", SKU: "A100"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := engine.DefaultParams("a100")
	want.KVAdmission = true
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Fleet numbers win over the defaults.
	got, err = Params(&schemas.Fleet{BlockTokens: 64}, schemas.FleetEngine{Name: "e", SKU: "h100",
		PrefillTokensPerS: 100, DecodeStepMs: schemas.DecodeStep{Base: 10, PerSeq: 1}, MaxBatch: 3, KVCacheTokens: 640, Replicas: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got.PrefillTokensPerS != 100 || got.DecodeBaseMs != 10 || got.DecodePerSeqMs != 1 || got.MaxBatch != 3 ||
		got.KVCacheTokens != 640 || got.BlockTokens != 64 || got.Replicas != 4 {
		t.Fatalf("fleet numbers lost: %+v", got)
	}
	if _, err := Params(f, schemas.FleetEngine{Name: "e", SKU: "tpu"}); err == nil || !strings.Contains(err.Error(), "no defaults") {
		t.Fatalf("unknown SKU without numbers: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" = valid
	}{
		{"default", func(*Config) {}, ""},
		{"no fleet", func(c *Config) { c.Fleet = nil }, "no fleet"},
		{"zero scale", func(c *Config) { c.TimeScale = 0 }, "time scale"},
		{"huge scale", func(c *Config) { c.TimeScale = 1e9 }, "time scale"},
		{"no status interval", func(c *Config) { c.StatusInterval = 0 }, "status interval"},
		{"default over max", func(c *Config) { c.DefaultOutputTokens = 10; c.MaxOutputTokens = 5 }, "output tokens"},
		{"bad topic", func(c *Config) { c.Topic = "a b" }, "topic"},
		{"unknown subset", func(c *Config) { c.Engines = []string{"nope"} }, "not in the fleet"},
		{"bad broker", func(c *Config) { c.Kafka.Brokers = []string{"nohost"} }, "broker"},
		{"no kafka is fine", func(c *Config) { c.Kafka.Brokers = nil; c.Producer.CloseTimeout = 0 }, ""},
		{"slash in name", func(c *Config) { c.Fleet.Engines[0].Name = "a/b" }, "engine name"},
	} {
		cfg := DefaultConfig()
		cfg.Fleet = testFleet(t)
		tc.edit(&cfg)
		err := cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestEngineSubset(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPAddr = ""
	cfg.Engines = []string{"a100-b"}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.signals.close()
	if got := s.EngineNames(); len(got) != 1 || got[0] != "a100-b" {
		t.Fatalf("engines %v", got)
	}
	if s.BaseURL("a100-b") != "" || s.Addr() != "" {
		t.Fatal("no listener, yet a URL")
	}
}

func TestVirtualClockRoundTrip(t *testing.T) {
	for _, scale := range []float64{0.5, 1, 3, 20, maxTimeScale} {
		c := virtualClock{start: time.Unix(1000, 0), scale: scale}
		for _, v := range []int64{0, 1, 999, 123456789, 1e15} {
			if got := c.at(c.wall(v)); got < v {
				t.Errorf("scale %v: at(wall(%d)) = %d, before it", scale, v, got)
			}
		}
	}
}
