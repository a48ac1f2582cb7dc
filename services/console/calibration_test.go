package console

import (
	"slices"
	"testing"
)

// TestCalibrationComparesModelWithEngines: the fake plans every engine at
// 2 of 4 rps with TTFT 300 + 100·ρ/(1−ρ) and TBOT 30 + 20·ρ; the engines
// report their own load and TTFT and a TBOT of 35 ms, window by window.
func TestCalibrationComparesModelWithEngines(t *testing.T) {
	c, f := played(t, 120, nil)
	st := getState(t, c.Handler())
	for i, e := range st.Engines {
		cal := e.Calibration
		if cal == nil || e.Plan == nil {
			t.Fatalf("%s: no calibration", e.Name)
		}
		// The last minute holds windows ending 60..119 s, one a second.
		if cal.Windows != 60 || cal.Requests != 600 || cal.Profile != "prior" || cal.CapacityRPS != 4 || cal.PlannedLoadRPS != 2 {
			t.Errorf("%s: %d windows, %d requests, profile %q, capacity %v, planned %v", e.Name, cal.Windows, cal.Requests, cal.Profile, cal.CapacityRPS, cal.PlannedLoadRPS)
		}
		load := 1 + float64(i)/3
		if i%2 == 1 { // engines at odd positions carry the fake's swing shift
			load += meanShift(60, 120)
		}
		if !near(cal.ObservedLoadRPS, load) || !near(cal.ObservedTTFTMs, 300+40*float64(i)) || cal.ObservedTBOTMs != 35 {
			t.Errorf("%s: observed load %v TTFT %v TBOT %v; want %v, %v, 35", e.Name, cal.ObservedLoadRPS, cal.ObservedTTFTMs, cal.ObservedTBOTMs, load, 300+40*float64(i))
		}
		rho := cal.ObservedLoadRPS / 4
		if !near(cal.PredictedTTFTMs, 300+100*rho/(1-rho)) || !near(cal.PredictedTBOTMs, 30+20*rho) {
			t.Errorf("%s: predicted TTFT %v TBOT %v at %v rps", e.Name, cal.PredictedTTFTMs, cal.PredictedTBOTMs, cal.ObservedLoadRPS)
		}
		if cal.PlannedTTFTMs != 400 || cal.PlannedTBOTMs != 40 {
			t.Errorf("%s: at the planned load TTFT %v TBOT %v, want 400 and 40", e.Name, cal.PlannedTTFTMs, cal.PlannedTBOTMs)
		}
		if cal.TTFTError == nil || !near(*cal.TTFTError, cal.PredictedTTFTMs/cal.ObservedTTFTMs-1) {
			t.Errorf("%s: TTFT error %v", e.Name, cal.TTFTError)
		}
	}
	// east-h100-0 is planned at 2 rps and carries 1: +100%, off; its
	// latencies are within 50%.
	if cal := st.Engines[0].Calibration; !slices.Equal(cal.Off, []string{"load"}) || *cal.LoadError != 1 {
		t.Errorf("%s: off %v, load error %v; want only the load, +100%%", f.fleet.Engines[0].Name, cal.Off, *cal.LoadError)
	}
}

// meanShift is the mean of shift(k) over k in [from, to).
func meanShift(from, to int) float64 {
	s := 0.0
	for k := from; k < to; k++ {
		s += shift(k)
	}
	return s / float64(to-from)
}

// near compares at the page's four decimals.
func near(got, want float64) bool { return got-want < 1e-3 && want-got < 1e-3 }
