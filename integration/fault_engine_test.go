package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ilb-router/ilb/services/enginesim"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// engineFleet is five small engines in one region serving fe-a.
var engineFleet = `
max_utilization: 0.8
block_tokens: 16
mean_output_tokens: 5
total_demand_rps: 20
network_ms:
  r: {r: 1}
clusters:
  - {name: fe-a, region: r, demand_share: 1}
engines:
` + engineLines("e", "r", 5, smallEngine)

// TestFaultEngineDownMidTraffic proves that an engine failing under
// traffic costs no retryable request, on both time scales ilb has. The whole loop
// runs (simulated engines → Kafka → aggregator → optimizer → NATS KV →
// data plane) with 40 requests/s of 200 ongoing conversations through the
// data plane's proxy. Then engine e-2 loses its only replica (like a
// crashed vLLM pod: new requests get 503, its status says no ready
// replica).
//
//   - Fast path, the data plane's guardrails: the status event (every
//     200 ms on Kafka) marks e-2 unavailable within 1 s, and from 1 s
//     after the fault on not a single attempt reaches it; the requests
//     that hit it before are retried on each conversation's next choice.
//   - Slow path, the optimizer: from the aggregator's window it derates
//     e-2 to zero capacity (its last status is unhealthy, no ready
//     replica) and publishes weights without it.
//   - Retries stay inside the budget (Finagle/Envoy: 20% of requests plus
//     10/s), and no retryable request fails.
//
// When the replica comes back the data plane takes e-2 again at once and
// the optimizer counts its full capacity again (how fast weight moves
// back is the optimizer's churn policy, not checked here). Lost: no
// retryable request. A request whose body the data plane streamed
// through unread (conversation and cluster in headers, as OpenAI clients
// and ilb's traffic generator send them) cannot be sent again, so the few
// of those that reach the failed engine before its status arrives get its
// 503; the test bounds them by the attempts the engine refused.
func TestFaultEngineDownMidTraffic(t *testing.T) {
	checkLeaks(t)
	fleet := parseFleet(t, engineFleet)
	brokers := streamstest.Kafka(t, allTopics...)
	natsURL := streamstest.NATS(t)
	_, log := newLogSink(t, slog.LevelWarn)
	dpm := newMeter(t)

	sc := enginesim.DefaultConfig()
	sc.Fleet, sc.TimeScale, sc.StatusInterval, sc.Logger = fleet, 10, 200*time.Millisecond, log
	sim, _ := startSim(t, sc, brokers)
	startAggregator(t, fastAggregator(fleet, brokers, "agg-engine-fault", time.Second), nil, log)
	opt := startOptimizer(t, fastOptimizer(fleet, "opt"), brokers, natsURL, nil, log)
	dc := fastDataplane(time.Minute, "fe-a")
	dc.EngineURLs = engineURLs(sim)
	dp := startDataplane(t, dc, dataplaneDeps{natsURL: natsURL, brokers: brokers, meter: dpm, log: log, name: "dp"})
	waitUntil(t, 15*time.Second, "the first snapshot at the data plane", func() bool { return dp.ready("fe-a") })

	// Even requests name their conversation in headers (the body streams
	// through unread and cannot be replayed), odd ones in the body (kept,
	// so a retry is possible).
	ld := startLoad(t, 40, func(ctx context.Context, c *http.Client, i int) (chatAnswer, error) {
		conv := fmt.Sprintf("conv-%d", i%200)
		if i%2 == 0 {
			return chat(ctx, c, dp.url, "fe-a", conv, 5)
		}
		return chatInBody(ctx, c, dp.url, "fe-a", conv, 5)
	})
	c := httpClient(t, 5*time.Second)
	const bad = "e-2"
	waitUntil(t, 10*time.Second, bad+" to serve traffic", func() bool { return engineInfo(sim, bad).Served > 10 })

	faultAt := time.Now()
	if err := sim.InjectFault(bad, enginesim.Fault{ReadyReplicas: new(0)}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Second, "the data plane to mark "+bad+" unavailable", func() bool {
		return !routing(t, c, dp.url, "fe-a").available(bad)
	})
	detected := time.Since(faultAt)
	time.Sleep(time.Until(faultAt.Add(time.Second)))
	refusedAt1s := engineInfo(sim, bad).Shed
	waitUntil(t, 10*time.Second, "the optimizer to derate "+bad+" and publish it at weight 0", func() bool {
		e := engineState(opt.o, bad)
		return e.CapacityRPS == 0 && (slices.Contains(e.Derate, "unhealthy") || slices.Contains(e.Derate, "no_ready_replicas")) &&
			routing(t, c, dp.url, "fe-a").Weights[bad] == 0
	})
	derated := time.Since(faultAt)
	if n := engineInfo(sim, bad).Shed; n != refusedAt1s {
		t.Errorf("%d attempts reached %s more than 1 s after it failed; the guardrails must keep traffic off it", n-refusedAt1s, bad)
	}

	if err := sim.ClearFaults(bad); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, bad+" back in the data plane and at full capacity in the optimizer", func() bool {
		return routing(t, c, dp.url, "fe-a").available(bad) && engineState(opt.o, bad).CapacityRPS > 0
	})
	ld.stop()

	lc := ld.counts()
	body, streamed := splitByRoute(ld.answersSince(time.Time{}))
	// Body-routed and header-routed requests alike are retried: the data
	// plane buffers bodies up to RetryBodyBytes (64 KiB), and these are
	// far smaller.
	for _, k := range []struct {
		name string
		lc   loadCounts
	}{{"body-routed", body}, {"header-routed", streamed}} {
		if k.lc.Failed > 0 || k.lc.Shed > 0 {
			t.Errorf("clients of %s requests saw %d failures and %d 429s of %d (codes %v); an engine failing must cost none",
				k.name, k.lc.Failed, k.lc.Shed, k.lc.Sent, k.lc.Codes)
		}
	}
	requests := dpm.value(t, "ilb_dataplane_requests_total")
	retries := dpm.value(t, "ilb_dataplane_retries_total")
	elapsed := time.Since(faultAt).Seconds() + 3
	if budget := 0.2*requests + 10*elapsed; retries > budget {
		t.Errorf("%v retries for %v requests over %.0f s: over the budget of 20%% + 10/s (%.0f)", retries, requests, elapsed, budget)
	}
	t.Logf("engine down: unavailable at the data plane after %v, derated and published at weight 0 after %v; %d attempts refused by it (none after 1 s); %d requests, %v retries (budget 20%% + 10/s); failed: %d of %d body-routed, %d of %d header-routed",
		detected.Round(time.Millisecond), derated.Round(time.Millisecond), refusedAt1s, lc.Sent, retries,
		body.Failed, body.Sent, streamed.Failed, streamed.Sent)
}

// splitByRoute counts the answers of body-routed (retryable) and
// header-routed (streamed) requests apart.
func splitByRoute(answers []timedAnswer) (body, streamed loadCounts) {
	body.Codes, streamed.Codes = map[int]int{}, map[int]int{}
	for _, a := range answers {
		lc := &streamed
		if a.InBody {
			lc = &body
		}
		lc.add(a.Code)
	}
	return body, streamed
}

// engineInfo returns the simulator's counters of engine name.
func engineInfo(sim *enginesim.Sim, name string) enginesim.EngineInfo {
	for _, e := range sim.Engines() {
		if e.Name == name {
			return e
		}
	}
	return enginesim.EngineInfo{}
}

// engineState returns the optimizer's view of engine name in its last
// solve.
func engineState(o *optimizer.Optimizer, name string) optimizer.EngineState {
	for _, e := range o.State().Engines {
		if e.Name == name {
			return e
		}
	}
	return optimizer.EngineState{CapacityRPS: -1}
}
