package routing

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

func TestDerate(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	f.Engines[1].Replicas = 4
	for _, c := range []struct {
		name   string
		engine int
		row    func(r *schemas.Feature)
		factor float64
		reason string
	}{
		{"healthy", 0, func(r *schemas.Feature) {}, 1, ""},
		{"unhealthy", 0, func(r *schemas.Feature) { r.Healthy = false }, 0, DerateUnhealthy},
		{"no ready replica", 0, func(r *schemas.Feature) { r.ReadyReplicas = 0 }, 0, DerateNoReady},
		{"3 of 4 replicas", 1, func(r *schemas.Feature) { r.ReadyReplicas = 3 }, 0.75, DerateReplicas},
		{"no status in window", 0, func(r *schemas.Feature) { r.StatusEvents, r.Healthy, r.ReadyReplicas = 0, false, 0 }, 1, ""},
		{"error rate 30%", 0, func(r *schemas.Feature) { r.Errors, r.ErrorRate = 30, 0.3 }, 0.7, DerateErrors},
		{"error rate 2% among error-free peers", 0, func(r *schemas.Feature) { r.Errors, r.ErrorRate = 2, 0.02 }, 1, ""},
		{"error rate 8% among error-free peers", 0, func(r *schemas.Feature) { r.Errors, r.ErrorRate = 8, 0.08 }, 0.92, DerateErrors},
		{"silent", 0, func(r *schemas.Feature) {
			r.WindowStartUnixNano -= int64(2 * time.Minute)
			r.WindowEndUnixNano -= int64(2 * time.Minute)
		}, 0, DerateSilent},
	} {
		t.Run(c.name, func(t *testing.T) {
			latest := make([]*schemas.Feature, len(f.Engines))
			for e, fe := range f.Engines {
				r := statusRow(20, fe.Name, 0)
				r.Requests = 100
				if e == c.engine {
					c.row(&r)
				}
				latest[e] = &r
			}
			got := Derate(DefaultDerateConfig(), f, latest, end(20))[c.engine]
			if math.Abs(got.Factor-c.factor) > 1e-12 {
				t.Errorf("factor %v, want %v (reasons %v)", got.Factor, c.factor, got.Reasons)
			}
			if want := c.reason; (want == "") != (len(got.Reasons) == 0) || (want != "" && got.Reasons[0] != want) {
				t.Errorf("reasons %v, want %q", got.Reasons, want)
			}
		})
	}
	// No row yet: full capacity.
	for _, d := range Derate(DefaultDerateConfig(), f, make([]*schemas.Feature, 2), end(3)) {
		if d.Factor != 1 || len(d.Reasons) != 0 {
			t.Errorf("cold start: %+v, want full capacity", d)
		}
	}
}

func TestDerateConfig(t *testing.T) {
	if err := DefaultDerateConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mutate := range []func(c *DerateConfig){
		func(c *DerateConfig) { c.MaxErrorRate = 0 },
		func(c *DerateConfig) { c.ErrorSigmas = math.Inf(1) },
		func(c *DerateConfig) { c.MinEngines = 1 },
		func(c *DerateConfig) { c.SilentAfter = 0 },
	} {
		c := DefaultDerateConfig()
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestCurrent(t *testing.T) {
	r := statusRow(5, "x", 0)
	if !Current(&r, end(5)) || !Current(&r, end(6)) || Current(&r, end(7)) {
		t.Error("a 10 s row hopping by 5 s is current for the newest window and the one after, not later")
	}
	if !slices.Equal([]bool{Current(&r, end(4))}, []bool{true}) {
		t.Error("a row newer than the newest end is current")
	}
}
