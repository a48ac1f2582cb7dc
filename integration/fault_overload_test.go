package integration

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ilb-router/ilb/services/enginesim"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// overloadFleet is two engines of about 8.7 requests/s each (a 10-token
// prompt, 20 output tokens: the optimizer's prior profile) serving fe-a,
// which asks for 26 requests/s: 150% of their capacity.
var overloadFleet = `
max_utilization: 0.7
block_tokens: 16
mean_output_tokens: 20
total_demand_rps: 26
network_ms:
  r: {r: 1}
clusters:
  - {name: fe-a, region: r, demand_share: 1}
engines:
` + engineLines("e", "r", 2, smallEngine)

// TestFaultOverload150Percent proves that demand above capacity is shed
// at the edge instead of queueing at the engines. fe-a sends 26 new
// conversations a second to two engines that can serve about 17.4 between
// them; the optimizer (whose demand estimate here is the fleet file's
// total_demand_rps, so the test isolates shedding from demand estimation)
// keeps the engines at max_utilization 0.7 and publishes a shed fraction
// of about 1 − 0.7/1.5 = 0.53. The data plane answers the shed requests at
// once with 429 and Retry-After, chosen by key hash so every replica sheds
// the same conversations. Checked over 8 s of overload: the shed share of
// requests is the snapshot's shed fraction (±0.1); the served requests'
// p99 latency stays within 3× the unloaded median, where without shedding
// the queue would grow by about 9 requests every second (4 s of queue
// after 8 s); the engines' queues stay short; and nothing is retried or
// throttled (a 429 from the edge is not a failure to retry). Lost: only
// what was deliberately shed.
func TestFaultOverload150Percent(t *testing.T) {
	checkLeaks(t)
	fleet := parseFleet(t, overloadFleet)
	brokers := streamstest.Kafka(t, allTopics...)
	natsURL := streamstest.NATS(t)
	_, log := newLogSink(t, slog.LevelWarn)
	dpm := newMeter(t)

	sc := enginesim.DefaultConfig()
	sc.Fleet, sc.Logger = fleet, log
	sim, _ := startSim(t, sc, nil)
	oc := fastOptimizer(fleet, "opt")
	oc.MeanPromptTokens = 10
	opt := startOptimizer(t, oc, brokers, natsURL, nil, log)
	dc := fastDataplane(time.Minute, "fe-a")
	dc.EngineURLs = engineURLs(sim)
	dp := startDataplane(t, dc, dataplaneDeps{natsURL: natsURL, meter: dpm, log: log, name: "dp"})
	waitUntil(t, 15*time.Second, "the first snapshot at the data plane", func() bool { return dp.ready("fe-a") })
	c := httpClient(t, 30*time.Second)
	shed := routing(t, c, dp.url, "fe-a").ShedFraction
	if math.Abs(shed-(1-0.7/1.5)) > 0.05 {
		t.Fatalf("the optimizer sheds %.3f of fe-a at 150%% demand; want about %.3f", shed, 1-0.7/1.5)
	}
	base := unloadedMedian(t, c, dp.url)

	waiting := watchQueues(t, sim)
	start := time.Now()
	ld := startLoad(t, 26, func(ctx context.Context, c *http.Client, i int) (chatAnswer, error) {
		return chat(ctx, c, dp.url, "fe-a", fmt.Sprintf("burst-%d", i), 20)
	})
	time.Sleep(8 * time.Second)
	ld.stop()
	maxWaiting := waiting()

	lc := ld.countsSince(start)
	var lat []float64
	for _, a := range ld.answersSince(start) {
		if a.Code == http.StatusOK {
			lat = append(lat, a.Latency.Seconds())
		}
	}
	p99 := quantile(lat, 0.99)
	if got := float64(lc.Shed) / float64(lc.Sent); math.Abs(got-shed) > 0.1 {
		t.Errorf("%.2f of the requests were shed; the snapshot says %.2f", got, shed)
	}
	if lc.Failed > 0 {
		t.Errorf("%d requests failed (codes %v); overload must be shed, not failed", lc.Failed, lc.Codes)
	}
	if p99 > 3*base {
		t.Errorf("served p99 latency %.2f s under 150%% demand, over 3× the unloaded median %.2f s", p99, base)
	}
	if maxWaiting > 8 {
		t.Errorf("an engine's queue reached %d requests; shedding must keep it short", maxWaiting)
	}
	retries := dpm.value(t, "ilb_dataplane_retries_total")
	throttled := dpm.value(t, "ilb_dataplane_throttled_total")
	if retries != 0 || throttled != 0 {
		t.Errorf("%v retries and %v throttled requests: no engine failed, so there must be none", retries, throttled)
	}
	t.Logf("150%% demand for 8 s (optimizer v%d sheds %.3f): %d requests, %d served, %d shed (%.2f), %d failed; served latency p50 %.2f s, p99 %.2f s (unloaded median %.2f s); engine queue max %d; %v retries, %v throttled",
		opt.o.State().Version, shed, lc.Sent, lc.OK, lc.Shed, float64(lc.Shed)/float64(lc.Sent), lc.Failed,
		quantile(lat, 0.5), p99, base, maxWaiting, retries, throttled)
}

// unloadedMedian is the median latency of ten requests sent one at a
// time.
func unloadedMedian(t *testing.T, c *http.Client, base string) float64 {
	t.Helper()
	var lat []float64
	for i := range 10 {
		a, err := chat(t.Context(), c, base, "fe-a", fmt.Sprintf("solo-%d", i), 20)
		if err != nil {
			t.Fatal(err)
		}
		if a.Code == http.StatusOK {
			lat = append(lat, a.Latency.Seconds())
		}
	}
	if len(lat) < 3 {
		t.Fatalf("only %d of 10 unloaded requests served", len(lat))
	}
	return quantile(lat, 0.5)
}

// watchQueues samples the engines' waiting requests every 50 ms until the
// returned function is called; it returns the largest seen.
func watchQueues(t *testing.T, sim *enginesim.Sim) func() int64 {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	top := int64(0)
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, e := range sim.Engines() {
				top = max(top, e.Waiting)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	stop := func() int64 {
		cancel()
		wg.Wait()
		return top
	}
	t.Cleanup(func() { stop() })
	return stop
}

// quantile is the q-quantile of xs (nearest rank); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}
