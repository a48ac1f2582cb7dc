package enginesim

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// In a synctest bubble time is virtual, so the wall-clock pacing of the
// engines can be checked exactly: at TimeScale 1 a request on an idle
// engine answers after its prefill plus its decode steps, to the
// nanosecond the model computes (rounded up by the clock mapping).
func TestWallClockPacingMatchesTheModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.HTTPAddr = ""
		cfg.TimeScale = 1
		cfg.StatusInterval = time.Hour
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		<-s.Ready()

		// 2000 bytes of content: "user: " + 2000 + "\n" = 2007 bytes, 502
		// tokens, uncached; then 100 output tokens = 99 decode steps at
		// batch 1.
		body, _ := json.Marshal(chat(100, false, "user", strings.Repeat("z", 2000)))
		t0 := time.Now()
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, chatPath("h100-a"), strings.NewReader(string(body))))
		elapsed := time.Since(t0)
		if rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		// h100-a has two replicas: the model doubles prefill throughput
		// and splits the per-sequence decode cost over them. The prompt
		// is one chunked step: the decode base plus its tokens.
		prefill := time.Duration(math.Round((28.91e-3 + 502.0/(2*9282)) * 1e9))
		step := time.Duration(math.Round((28.91 + 0.3343/2) * 1e6))
		want := prefill + 99*step
		if d := elapsed - want; d < 0 || d > 10*time.Microsecond {
			t.Fatalf("answered after %v, model says %v", elapsed, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
