package console

import (
	"math"
	"testing"
)

// TestGoodputAndShedByReason: per cluster, goodput and SLO attainment
// over the last minute and since the start, shed and failed requests
// counting as misses, and the data plane's refusals by reason, now and in
// the history.
func TestGoodputAndShedByReason(t *testing.T) {
	c, _ := played(t, 120, nil)
	st := getState(t, c.Handler())
	east := st.Clusters[0]
	// At 119 s: 10 outcomes a second (9 answered, 1 shed); good 8 a
	// second, 5 during the swing from 60 s.
	v := east.SLO
	if v == nil {
		t.Fatal("fe-east has no SLO view")
	}
	good := fakeGood(119)
	if v.Good != good || v.Outcomes != 1190 || v.Attainment != round4(float64(good)/1190) {
		t.Errorf("since start: good %d of %d, attainment %v; want %d of 1190, %v", v.Good, v.Outcomes, v.Attainment, good, round4(float64(good)/1190))
	}
	// The last minute spans samples 59 to 119, all in the swing.
	if v.Outcomes1m != 600 || v.WindowSeconds != 60 || v.Attainment1m != round4(float64(good-fakeGood(59))/600) ||
		math.Abs(v.GoodputRPS1m-float64(good-fakeGood(59))/60) > 1e-3 {
		t.Errorf("last minute: %d outcomes over %v s, attainment %v, goodput %v", v.Outcomes1m, v.WindowSeconds, v.Attainment1m, v.GoodputRPS1m)
	}
	if east.GoodRPS != 5 || east.ShedSnapshotRPS != 3 || east.ShedAdmissionRPS != 1 {
		t.Errorf("rates: good %v, shed by snapshot %v, by admission %v; want 5, 3, 1", east.GoodRPS, east.ShedSnapshotRPS, east.ShedAdmissionRPS)
	}
	if st.Traffic.Good != 3*good || st.Traffic.GoodRPS != 15 {
		t.Errorf("totals: good %d at %v/s, want %d at 15/s", st.Traffic.Good, st.Traffic.GoodRPS, 3*good)
	}
	h := st.History.Clusters[0]
	if h.GoodRPS[30] != 8 || h.GoodRPS[100] != 5 || h.ShedSnapshotRPS[100] != 3 || h.ShedAdmissionRPS[100] != 1 {
		t.Errorf("history: good %v then %v, shed %v and %v", h.GoodRPS[30], h.GoodRPS[100], h.ShedSnapshotRPS[100], h.ShedAdmissionRPS[100])
	}
	// Sample 0 has no outcome yet; at 30 s everything so far is good at
	// 0.8; at 119 s the minute is the swing's.
	if h.Attainment1m[0] != -1 || h.Attainment1m[30] != 0.8 || h.Attainment1m[119] != v.Attainment1m {
		t.Errorf("history attainment %v, %v, %v; want -1, 0.8, %v", h.Attainment1m[0], h.Attainment1m[30], h.Attainment1m[119], v.Attainment1m)
	}
}
