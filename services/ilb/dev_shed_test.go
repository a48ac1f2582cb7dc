package main

import (
	"encoding/json"
	"testing"
	"time"
)

// devShed reads every cluster's shed fraction and shed count from ilb
// dev's /v1/routing.
func devShed(t *testing.T, base string) (frac map[string]float64, total map[string]float64) {
	t.Helper()
	_, b := httpDo(t, "GET", base+"/v1/routing", "")
	var r struct {
		Clusters map[string]struct {
			ShedFraction float64 `json:"shed_fraction"`
			ShedTotal    float64 `json:"shed_total"`
			RefusedTotal float64 `json:"refused_total"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("routing: %v: %.300s", err, b)
	}
	frac, total = map[string]float64{}, map[string]float64{}
	for c, v := range r.Clusters {
		frac[c], total[c] = v.ShedFraction, v.ShedTotal+v.RefusedTotal
	}
	return frac, total
}

// Shedding is a last resort (issue 13): `ilb dev` on its defaults (the
// two-model example fleet, its declared demand, 10 s windows) refuses
// nothing before the demand swing, and stops refusing once the swing has
// passed. Only the swing is changed, to keep the test short: fe-east ×8
// from 20 s to 60 s instead of ×3 from 60 s to 180 s (which refuses
// nothing at all: 0 of about 4,000 requests over five minutes). It must
// shed during the swing, or the test would prove nothing, so the swing
// must leave the fleet short: fe-east's 5.4 rps ×8 and the others' 6.6
// are about 50 rps against the six engines' ~25 rps within the TBOT SLO
// (the a100s capped at their SLO load, routing.SLOLoad). The swing's
// conversations go on after it (their follow-up turns), so demand stays
// raised for a while: before the SLO caps a ×12 swing was used, and
// fe-west still refused a few requests 84 s after one of 70 s in one CI
// run and 101 s after one of 40 s under the race detector (where the
// simulated engines run slower); with the caps a ×12 swing left 1-10%
// refused 110 s after it on a loaded machine, a ×8 one nothing (8
// refused during it). The check starts 110 s after this one and lasts
// 50 s.
func TestDevShedsOnlyInTheSwing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ilb dev for ~220 s")
	}
	start := time.Now()
	d := startDev(t, "--swing-schedule", "fe-east*8@20s-60s/10m")
	defer d.stop(t)
	base := "http://" + d.info.HTTP
	var during float64
	settled := map[string]float64{}
	for {
		el := time.Since(start)
		if el > 220*time.Second {
			break
		}
		frac, total := devShed(t, base)
		for c, n := range total {
			switch {
			case el < 18*time.Second && (n > 0 || frac[c] > 0):
				t.Fatalf("at %v, before the swing: %s shed %v (fraction %.3f), want nothing", el.Round(time.Second), c, n, frac[c])
			case el >= 20*time.Second && el < 170*time.Second:
				during = max(during, n)
			case el >= 170*time.Second:
				// A fraction under 1/1000 is a solve's rounding at a
				// cluster whose demand sits at its share of the caps (seen
				// once with the machine loaded by other tests), not a
				// shortfall; the count below holds what was refused.
				if frac[c] > 1e-3 {
					t.Errorf("at %v, 110 s after the swing: %s still sheds %g", el.Round(time.Second), c, frac[c])
				}
				if s, ok := settled[c]; !ok {
					settled[c] = n
				} else if n > s {
					t.Errorf("at %v, 110 s after the swing: %s refused %v more", el.Round(time.Second), c, n-s)
					settled[c] = n
				}
			}
		}
		time.Sleep(time.Second)
	}
	if during == 0 {
		t.Error("nothing shed during a swing that leaves the fleet short: the check above proves nothing")
	}
	t.Logf("shed during the swing: up to %v requests in a cluster; after it: %v", during, settled)
}
