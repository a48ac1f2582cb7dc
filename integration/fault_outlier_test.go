package integration

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/enginesim"
)

// The data plane's local guardrails against engines that fail without
// saying so (no status event, only bad answers), measured against the
// figures of the systems they copy. Ten simulated engines serve one
// cluster from a static snapshot (equal weights), so nothing but the
// guardrails moves traffic; requests carry their conversation in the body,
// so the data plane can retry them. Anchors:
//
//   - Envoy outlier detection: eject after 5 consecutive 5xx; eject when
//     the success rate is below mean − 1.9·stdev of the engines with
//     enough requests; never more than 10% of the engines ejected.
//   - Envoy/Finagle retry budget: retries ≤ 20% of requests + 10/s.
//   - Google SRE client-side throttling: reject locally with probability
//     max(0, (requests − 2·accepts)/(requests + 1)).
//
// Envoy's success-rate minimum of 100 requests per 10 s interval, the
// budget's 10 s window and SRE's 2-minute throttling window are scaled
// down (10 requests per 1 s, 1 s, 1 s) so each case plays out in seconds;
// the thresholds and rates are the anchors' own.

// outlierFleet is ten small engines serving fe-a.
var outlierFleet = `
max_utilization: 0.8
block_tokens: 16
network_ms:
  r: {r: 1}
clusters:
  - {name: fe-a, region: r, demand_share: 1}
engines:
` + engineLines("e", "r", 10, smallEngine)

// guardrailRig is ten simulated engines behind a data plane that serves a
// static equal-weight snapshot.
type guardrailRig struct {
	sim *enginesim.Sim
	dp  *dataplaneRun
	m   *meter
	c   *http.Client
}

func newGuardrailRig(t *testing.T, tweak func(*dataplane.Config)) *guardrailRig {
	t.Helper()
	fleet := parseFleet(t, outlierFleet)
	_, log := newLogSink(t, slog.LevelWarn)
	sc := enginesim.DefaultConfig()
	sc.Fleet, sc.TimeScale, sc.Logger = fleet, 20, log
	sim, _ := startSim(t, sc, nil)
	dc := fastDataplane(time.Hour, "fe-a")
	dc.EngineURLs = engineURLs(sim)
	tweak(&dc)
	r := &guardrailRig{sim: sim, m: newMeter(t), c: httpClient(t, 5*time.Second)}
	r.dp = startDataplane(t, dc, dataplaneDeps{meter: r.m, log: log, name: "dp"})
	if err := r.dp.d.SetSnapshot(equalSnapshot(fleet, "fe-a")); err != nil {
		t.Fatal(err)
	}
	return r
}

// load sends rps retryable requests per second, each a new conversation.
func (r *guardrailRig) load(t *testing.T, rps float64) *load {
	return startLoad(t, rps, func(ctx context.Context, c *http.Client, i int) (chatAnswer, error) {
		return chatInBody(ctx, c, r.dp.url, "fe-a", fmt.Sprintf("new-%d", i), 3)
	})
}

// ejected lists the engines the data plane has ejected as outliers.
func (r *guardrailRig) ejected(t *testing.T) []string {
	var out []string
	for _, e := range routing(t, r.c, r.dp.url, "fe-a").Engines {
		if !e.Available && e.Reason == "outlier" {
			out = append(out, e.Name)
		}
	}
	return out
}

// retryBudgetHolds checks the retries against the Finagle/Envoy budget
// over elapsed seconds, and returns them.
func (r *guardrailRig) retryBudgetHolds(t *testing.T, elapsed time.Duration) (retries, requests float64) {
	t.Helper()
	retries = r.m.value(t, "ilb_dataplane_retries_total")
	requests = r.m.value(t, "ilb_dataplane_requests_total")
	if budget := 0.2*requests + 10*elapsed.Seconds(); retries > budget {
		t.Errorf("%v retries for %v requests in %v: over the budget 20%% + 10/s = %.0f", retries, requests, elapsed, budget)
	}
	return retries, requests
}

// TestFaultOutlierConsecutive5xx: two of ten engines start failing every
// request (HTTP 500) under 100 requests/s. After 5 consecutive 5xx one of
// them is ejected, within a second at this rate; the other is not, because ejecting it would put 20% of
// the engines out (Envoy's max_ejection_percent 10). The requests it
// keeps failing are retried on their next choice inside the budget, so no
// client sees a failure. Lost: nothing.
func TestFaultOutlierConsecutive5xx(t *testing.T) {
	checkLeaks(t)
	r := newGuardrailRig(t, func(*dataplane.Config) {})
	ld := r.load(t, 100)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	for _, e := range []string{"e-3", "e-7"} {
		if err := r.sim.InjectFault(e, enginesim.Fault{ErrorRate: new(1.0)}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, time.Second, "an ejection", func() bool { return len(r.ejected(t)) > 0 })
	took := time.Since(start)
	time.Sleep(3 * time.Second)
	ld.stop()
	ej := r.ejected(t)
	if len(ej) != 1 || (ej[0] != "e-3" && ej[0] != "e-7") {
		t.Errorf("ejected %v; want exactly one of the two failing engines (at most 10%% of 10)", ej)
	}
	if n := r.m.value(t, "ilb_dataplane_ejections_total", attribute.String("reason", "consecutive_5xx")); n != 1 {
		t.Errorf("%v consecutive-5xx ejections, want 1", n)
	}
	lc := ld.counts()
	if lc.Failed > 0 {
		t.Errorf("%d of %d requests failed (codes %v); retries on the next choice must hide the failing engines", lc.Failed, lc.Sent, lc.Codes)
	}
	retries, requests := r.retryBudgetHolds(t, time.Since(start)+time.Second)
	if retries == 0 {
		t.Error("no retry, yet one failing engine stayed in service")
	}
	t.Logf("2 of 10 engines failing: %v ejected after %v (cap 10%%); %d client requests, %v at the data plane, %v retries (%.1f%%; budget 20%% + 10/s), %d failed",
		ej, took.Round(time.Millisecond), lc.Sent, requests, retries, 100*retries/max(requests, 1), lc.Failed)
}

// TestFaultOutlierSuccessRate: one of ten engines fails half its requests
// at random, rarely 5 in a row; the consecutive-5xx detector is set out of
// reach so that the success-rate detector alone must find it: its success
// rate is below the mean − 1.9·stdev of the engines with at least 10
// requests in the 1 s interval, and it is the only engine ejected. Lost:
// nothing (its failures are retried).
func TestFaultOutlierSuccessRate(t *testing.T) {
	checkLeaks(t)
	r := newGuardrailRig(t, func(dc *dataplane.Config) {
		dc.Outlier.Consecutive5xx = 1 << 20
		dc.Outlier.Interval, dc.Outlier.RequestVolume = time.Second, 10
	})
	ld := r.load(t, 100)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := r.sim.InjectFault("e-4", enginesim.Fault{ErrorRate: new(0.5)}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "a success-rate ejection", func() bool { return len(r.ejected(t)) > 0 })
	took := time.Since(start)
	ld.stop()
	if ej := r.ejected(t); len(ej) != 1 || ej[0] != "e-4" {
		t.Errorf("ejected %v; want e-4 alone", ej)
	}
	if n := r.m.value(t, "ilb_dataplane_ejections_total", attribute.String("reason", "success_rate")); n != 1 {
		t.Errorf("%v success-rate ejections, want 1", n)
	}
	lc := ld.counts()
	if lc.Failed > 0 {
		t.Errorf("%d of %d requests failed (codes %v)", lc.Failed, lc.Sent, lc.Codes)
	}
	retries, requests := r.retryBudgetHolds(t, time.Since(start)+500*time.Millisecond)
	t.Logf("1 of 10 engines failing 50%%: ejected by success rate after %v; %v requests, %v retries, %d failed",
		took.Round(time.Millisecond), requests, retries, lc.Failed)
}

// TestFaultOutlierAllRejectNoRetryStorm: every engine starts refusing
// (503, without a status event to say so) under 50 requests/s. Retrying
// everything would send the engines three attempts per request. Instead:
// the retry budget caps retries at 20% of requests plus 10/s (over
// Finagle's sliding window, scaled here to 1 s), and client-side
// throttling (SRE, K = 2, window scaled to 1 s) rejects locally with
// probability max(0, (requests − 2·accepts)/(requests + 1)): once the
// window holds only refusals, over 90% of requests never reach an engine.
// When the engines recover, the few requests let through are accepted,
// and since locally rejected requests count as requests, the admitted
// share about doubles every window (a = 1 − p, p ≈ 1 − 2a): service comes
// back within a few windows (checked: 12), not at once.
func TestFaultOutlierAllRejectNoRetryStorm(t *testing.T) {
	checkLeaks(t)
	const window = time.Second
	r := newGuardrailRig(t, func(dc *dataplane.Config) { dc.Throttle.Window, dc.Retry.Window = window, window })
	names := r.sim.EngineNames()
	attempts := func() float64 {
		n := uint64(0)
		for _, e := range r.sim.Engines() {
			n += e.Shed
		}
		return float64(n)
	}
	throttled := func() float64 { return r.m.value(t, "ilb_dataplane_throttled_total") }
	ld := r.load(t, 50)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	for _, e := range names {
		if err := r.sim.InjectFault(e, enginesim.Fault{Healthy: new(false)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2500 * time.Millisecond)
	a0, th0, sent0 := attempts(), throttled(), ld.countsSince(start).Sent
	time.Sleep(time.Second)
	a1, th1, sent1 := attempts(), throttled(), ld.countsSince(start).Sent
	storm := ld.countsSince(start)
	elapsed := time.Since(start)
	retries := r.m.value(t, "ilb_dataplane_retries_total")
	requests := r.m.value(t, "ilb_dataplane_requests_total")
	windows := math.Ceil((elapsed + 500*time.Millisecond).Seconds() / window.Seconds())
	if budget := 0.2*requests + 10*window.Seconds()*windows; retries > budget {
		t.Errorf("%v retries for %v requests: over the budget 20%% + 10/s per %v window (%.0f)", retries, requests, window, budget)
	}
	last := float64(sent1 - sent0)
	if share := (th1 - th0) / last; share < 0.9 {
		t.Errorf("in the last second of the outage %.0f%% of %v requests were throttled locally; with only refusals in the window SRE throttling rejects over 90%%", 100*share, last)
	}
	if a1-a0 > 0.2*last+10 {
		t.Errorf("%v attempts reached the refusing engines in the last second for %v requests: the throttle and budget must hold them back", a1-a0, last)
	}

	healed := time.Now()
	for _, e := range names {
		if err := r.sim.ClearFaults(e); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 12*window, "requests to be served again", func() bool {
		lc := ld.countsSince(time.Now().Add(-500 * time.Millisecond))
		return lc.Sent > 10 && lc.OK == lc.Sent
	})
	recovered := time.Since(healed)
	ld.stop()
	t.Logf("all 10 engines refusing for 3.5 s: %d requests, %v throttled locally, %v attempts reached engines (%.0f per 100 requests; 300 without protection), %v retries; last second: %.0f%% throttled, %v attempts for %v requests; served again %v after they healed",
		storm.Sent, th1, a1, 100*a1/float64(max(storm.Sent, 1)), retries, 100*(th1-th0)/last, a1-a0, last,
		recovered.Round(100*time.Millisecond))
}
