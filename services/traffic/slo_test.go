package traffic

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// TestStreamTimesTokens checks the client's TTFT and mean time between
// tokens on a streamed answer: the fake sends half the reply after
// firstByte and the rest after another rest, reporting max_tokens output
// tokens, so TBOT is rest/(max_tokens − 1).
func TestStreamTimesTokens(t *testing.T) {
	for _, tc := range []struct {
		maxTokens int
		wantTBOT  time.Duration
	}{{4, 20 * time.Millisecond}, {61, time.Millisecond}, {1, 0}} {
		synctest.Test(t, func(t *testing.T) {
			plane := newFakePlane()
			plane.rest = 60 * time.Millisecond
			cfg := testConfig(plane)
			c := newClient(&cfg)
			s := &Script{ID: "conv-1", Cluster: "fe-a"}
			r := c.send(t.Context(), s, []message{{Role: "system", Content: systemPrompt}, {Role: "user", Content: "hi"}}, tc.maxTokens)
			if r.err != nil || r.status != 200 {
				t.Fatalf("send: status %d, err %v", r.status, r.err)
			}
			if !r.streamed || r.ttft != 100*time.Millisecond || r.tbot != tc.wantTBOT || r.outputTokens != tc.maxTokens {
				t.Errorf("max_tokens %d: streamed %v ttft %v tbot %v tokens %d; want true, 100ms, %v, %d",
					tc.maxTokens, r.streamed, r.ttft, r.tbot, r.outputTokens, tc.wantTBOT, tc.maxTokens)
			}
		})
	}
}

// TestGoodCountsAnswersWithinSLO runs the generator against the fake
// (TTFT 100 ms, TBOT at most 50 ms) under SLOs it meets and misses.
func TestGoodCountsAnswersWithinSLO(t *testing.T) {
	for _, tc := range []struct {
		name   string
		slo    SLO
		stream bool
		all    bool // want Good == OK, else Good == 0
	}{
		{"met", SLO{TTFT: 100 * time.Millisecond, TBOT: 50 * time.Millisecond}, true, true},
		{"ttft missed", SLO{TTFT: 99 * time.Millisecond, TBOT: time.Second}, true, false},
		{"not streamed", SLO{TTFT: time.Minute, TBOT: time.Minute}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				plane := newFakePlane()
				cfg := testConfig(plane)
				cfg.SLO, cfg.Stream = tc.slo, tc.stream
				g, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				st := runFor(t, g, 2*time.Minute)
				a := st.Clusters[0]
				want := int64(0)
				if tc.all {
					want = a.OK
				}
				if a.OK == 0 || a.Good != want || st.Total.Good < a.Good {
					t.Errorf("fe-a: ok %d good %d (total good %d); want good %d", a.OK, a.Good, st.Total.Good, want)
				}
				if tc.stream && (a.TBOTMs.N == 0 || a.TBOTMs.P99 > 50) {
					t.Errorf("fe-a TBOT %+v: want samples, each at most 50 ms", a.TBOTMs)
				}
			})
		})
	}
}

func TestSLOOfFleet(t *testing.T) {
	f := &schemas.Fleet{TTFTSLOMs: 1500}
	if got := SLOOf(f); got != (SLO{TTFT: 1500 * time.Millisecond, TBOT: schemas.DefaultTBOTSLOMs * time.Millisecond}) {
		t.Errorf("SLOOf = %+v, want TTFT 1.5s and the default TBOT", got)
	}
	cfg := DefaultConfig()
	cfg.SLO.TBOT = 0
	if err := cfg.Validate(); err == nil {
		t.Error("Validate accepted a zero TBOT SLO")
	}
}
