package main

import (
	"encoding/json"
	"fmt"
	"strings"
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

// devOptimizerState is what the optimizer saw, for a failure message:
// each row's demand and shed fraction, each engine's capacity (and SLO
// cap) and load, and where its profile came from.
func devOptimizerState(t *testing.T, base string) string {
	t.Helper()
	_, b := httpDo(t, "GET", base+"/v1/optimizer", "")
	var o struct {
		Version  int `json:"version"`
		Clusters []struct {
			Name         string  `json:"name"`
			DemandRPS    float64 `json:"demand_rps"`
			ObservedRPS  float64 `json:"observed_rps"`
			ShedFraction float64 `json:"shed_fraction"`
		} `json:"clusters"`
		Engines []struct {
			Name        string  `json:"name"`
			Profile     string  `json:"profile"`
			CapacityRPS float64 `json:"capacity_rps"`
			LoadRPS     float64 `json:"load_rps"`
			Model       struct {
				MaxLoadRPS float64 `json:"max_load_rps"`
			} `json:"model"`
		} `json:"engines"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Sprintf("optimizer: %v: %.300s", err, b)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "snapshot v%d", o.Version)
	for _, c := range o.Clusters {
		fmt.Fprintf(&sb, "\n  %s: demand %.2f rps (observed %.2f), shed %.4f", c.Name, c.DemandRPS, c.ObservedRPS, c.ShedFraction)
	}
	for _, e := range o.Engines {
		fmt.Fprintf(&sb, "\n  %s (%s): capacity %.2f rps, SLO cap %.2f, load %.2f", e.Name, e.Profile, e.CapacityRPS, e.Model.MaxLoadRPS, e.LoadRPS)
	}
	return sb.String()
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
// (the a100s capped at their SLO load, routing.SLOLoad).
//
// The swing's conversations go on after it (their follow-up turns), and
// under the race detector, with other packages' tests on the same two
// cores, the simulated engines run slower than their model, so their
// fitted profiles (and the SLO caps) come out lower: demand stays near
// the caps for a while. Locally, under the race detector with two or four
// busy loops beside it, nothing is refused after 70 s; in one CI run in
// five, fe-east and fe-west still shed 0.3% and 1.1% 110 s after the
// swing, falling. So the test asks that shedding stops for good: from
// 110 s after the swing, it watches until 50 s have passed with nothing
// shed or refused, and fails if that has not happened 220 s after the
// swing (each shed seen on the way is logged with what the optimizer saw).
func TestDevShedsOnlyInTheSwing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ilb dev for 220-280 s")
	}
	const (
		settle = 170 * time.Second // 110 s after the swing
		clean  = 50 * time.Second  // nothing shed for this long
		limit  = 280 * time.Second // 220 s after the swing
	)
	start := time.Now()
	d := startDev(t, "--swing-schedule", "fe-east*8@20s-60s/10m")
	defer d.stop(t)
	base := "http://" + d.info.HTTP
	var during float64
	settled := map[string]float64{}
	lastShed := settle // when the last shed or refusal after settle was seen
	logged := 0
	for {
		el := time.Since(start)
		if el > limit || el-lastShed >= clean {
			break
		}
		frac, total := devShed(t, base)
		for c, n := range total {
			switch {
			case el < 18*time.Second && (n > 0 || frac[c] > 0):
				t.Fatalf("at %v, before the swing: %s shed %v (fraction %.3f), want nothing", el.Round(time.Second), c, n, frac[c])
			case el >= 20*time.Second && el < settle:
				during = max(during, n)
			case el >= settle:
				// A fraction under 1/1000 is a solve's rounding at a
				// cluster whose demand sits at its share of the caps (seen
				// once with the machine loaded by other tests), not a
				// shortfall; the count below holds what was refused.
				shed := frac[c] > 1e-3
				if s, ok := settled[c]; ok && n > s {
					shed = true
				}
				settled[c] = n
				if shed {
					lastShed = el
					if logged < 5 {
						logged++
						t.Logf("at %v, %v after the swing: %s sheds %.4f, %v refused in all; %s",
							el.Round(time.Second), (el - 60*time.Second).Round(time.Second), c, frac[c], n, devOptimizerState(t, base))
					}
				}
			}
		}
		time.Sleep(time.Second)
	}
	if during == 0 {
		t.Error("nothing shed during a swing that leaves the fleet short: the check above proves nothing")
	}
	if el := time.Since(start); el-lastShed < clean {
		t.Errorf("still shedding %v after the swing (last at %v): it should stop once the swing has passed",
			(el - 60*time.Second).Round(time.Second), lastShed.Round(time.Second))
	}
	last := "none"
	if lastShed > settle {
		last = fmt.Sprintf("at %v", lastShed.Round(time.Second))
	}
	t.Logf("shed during the swing: up to %v requests in a cluster; after it: %v; the last shed from %v on: %s",
		during, settled, settle, last)
}
