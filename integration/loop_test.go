package integration

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/aggregator"
	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/enginesim"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/services/traffic"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// loopFleet is small and fast so the loop turns in seconds on two cores:
// one engine in region a, two in region b, 80 ms apart. An engine serves
// about 7 requests/s of this test's traffic (a 300-token prompt, 20 output
// tokens, batches of 4), so fe-a's 3 requests/s fit on a-0 and its swing
// to 12 does not: the spare capacity is in region b.
const loopFleet = `
max_utilization: 0.8
block_tokens: 16
mean_output_tokens: 20
total_demand_rps: 6
network_ms:
  a: {a: 1, b: 80}
  b: {b: 1}
clusters:
  - {name: fe-a, region: a, demand_share: 0.5}
  - {name: fe-b, region: b, demand_share: 0.5}
engines:
  - {name: a-0, region: a, sku: small, prefill_tokens_per_s: 20000, decode_step_ms: {base: 20, per_seq: 1}, max_batch: 4, kv_cache_tokens: 100000}
  - {name: b-0, region: b, sku: small, prefill_tokens_per_s: 20000, decode_step_ms: {base: 20, per_seq: 1}, max_batch: 4, kv_cache_tokens: 100000}
  - {name: b-1, region: b, sku: small, prefill_tokens_per_s: 20000, decode_step_ms: {base: 20, per_seq: 1}, max_batch: 4, kv_cache_tokens: 100000}
`

// The demand swing: fe-a's demand ×4 from swingAt on.
const (
	swingAt     = 12 * time.Second
	swingFactor = 4
	runFor      = 42 * time.Second
	// shiftBy is how much of fe-a's traffic must move to region b, and
	// maxSolves within how many published snapshots after the swing.
	shiftBy   = 0.25
	maxSolves = 20
	// A move smaller than deadband is noise, not a change of direction.
	deadband = 0.05
)

// TestLoopShiftsWeightsOnDemandSwing runs the whole loop on embedded
// brokers through the real services (simulated engines → Kafka signals →
// aggregator features → optimizer → JetStream KV snapshots → data plane →
// engines, driven by the traffic generator) and proves the property the
// optimizer exists for: when one region's demand swings above its local
// capacity, that cluster's weights move toward spare capacity elsewhere
// within a bounded number of solves, the data plane routes by them, and
// the weights do not oscillate back and forth while the demand stays up
// (the legacy controller's failure, DESIGN.md).
func TestLoopShiftsWeightsOnDemandSwing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole loop for ~45 s")
	}
	// Registered first, so it runs after the brokers' cleanups.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	fleet, err := schemas.ParseFleet([]byte(loopFleet))
	if err != nil {
		t.Fatal(err)
	}
	l := newLoop(t, fleet)
	ctx, cancel := context.WithTimeout(t.Context(), runFor+30*time.Second)
	defer cancel()
	if err := l.run(ctx, runFor); err != nil {
		t.Fatalf("loop: %v", err)
	}
	checkShift(t, l)
}

type loop struct {
	fleet *schemas.Fleet
	sim   *enginesim.Sim
	agg   *aggregator.Aggregator
	opt   *optimizer.Optimizer
	dp    *dataplane.DataPlane
	gen   *traffic.Generator
	// trafficStart is when the generator started (the swing's zero);
	// stats the generator's counts just before the run ended.
	trafficStart time.Time
	stats        traffic.Stats
}

func newLoop(t *testing.T, fleet *schemas.Fleet) *loop {
	t.Helper()
	brokers := streamstest.Kafka(t, schemas.TopicSignals, schemas.TopicSignalsDLQ, schemas.TopicFeatures, aggregator.TopicProfiles)
	natsURL := streamstest.NATS(t)
	kcfg := func(id string) kafka.ClientConfig {
		c := kafka.DefaultClientConfig()
		c.Brokers, c.ClientID = brokers, id
		return c
	}
	nc, js, err := kv.Connect(t.Context(), kv.Config{URL: natsURL, Name: "loop", ConnectTimeout: 5 * time.Second,
		ReconnectWait: 200 * time.Millisecond, ReconnectBufBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := &loop{fleet: fleet}

	sc := enginesim.DefaultConfig()
	sc.Fleet, sc.HTTPAddr, sc.Kafka, sc.Logger = fleet, "127.0.0.1:0", kcfg("loop-sim"), log
	sc.StatusInterval = 500 * time.Millisecond
	if l.sim, err = enginesim.New(sc); err != nil {
		t.Fatal(err)
	}

	ac := aggregator.DefaultConfig()
	ac.Kafka = kcfg("loop-aggregator")
	ac.ConfigFromFleet(fleet)
	// Four-second windows every second, closed 0.4 s after they end:
	// features every second, each counting enough requests that Poisson
	// noise does not pass for a change in demand. Profiles are not
	// refitted during the run, so the optimizer solves with the fleet
	// file's prior profiles and what moves the weights is demand alone.
	ac.Window, ac.Hop, ac.OutOfOrder, ac.AllowedLateness = 4*time.Second, time.Second, 200*time.Millisecond, 200*time.Millisecond
	ac.IdleTimeout, ac.ProfileInterval = 2*time.Second, time.Hour
	if l.agg, err = aggregator.New(ac, aggregator.Deps{Logger: log}); err != nil {
		t.Fatal(err)
	}

	oc := optimizer.DefaultConfig(fleet)
	oc.MinInterval, oc.MaxInterval, oc.SettleDelay = 500*time.Millisecond, 5*time.Second, 100*time.Millisecond
	oc.MeanPromptTokens = 300
	okc := kcfg("loop-optimizer")
	if l.opt, err = optimizer.New(oc, optimizer.Deps{JetStream: js, NATS: nc, Kafka: &okc, Logger: log}); err != nil {
		t.Fatal(err)
	}

	dc := dataplane.DefaultConfig()
	dc.Clusters = []string{"fe-a", "fe-b"}
	dc.EngineURLs, dc.EngineCapacity = map[string]string{}, map[string]int{}
	for _, e := range fleet.Engines {
		dc.EngineURLs[e.Name], dc.EngineCapacity[e.Name] = l.sim.BaseURL(e.Name), e.MaxBatch
	}
	dkc := kcfg("loop-dataplane")
	if l.dp, err = dataplane.New(dc, dataplane.Deps{JetStream: js, NATS: nc, Kafka: &dkc, Logger: log}); err != nil {
		t.Fatal(err)
	}
	return l
}

// run runs the services; the traffic generator starts once every cluster
// has a snapshot and runs for d, then the whole loop stops. A service that
// fails stops the loop.
func (l *loop) run(ctx context.Context, d time.Duration) error {
	srv := httptest.NewServer(l.dp.Handler())
	defer srv.Close()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	for _, svc := range []func(context.Context) error{l.sim.Run, l.agg.Run, l.opt.Run, l.dp.Run} {
		g.Go(func() error { return svc(gctx) })
	}
	g.Go(func() error {
		defer stop()
		return l.drive(gctx, srv.URL, d)
	})
	err := g.Wait()
	if err == context.Canceled {
		err = nil
	}
	return err
}

// drive plays the traffic with fe-a's demand swing for d.
func (l *loop) drive(ctx context.Context, url string, d time.Duration) error {
	if !waitReady(ctx, l.dp, l.fleet) {
		return fmt.Errorf("no snapshot for every cluster: %w", ctx.Err())
	}
	tc := traffic.DefaultConfig()
	tc.BaseURL, tc.Clusters, tc.TotalDemandRPS = url, traffic.ClustersOf(l.fleet), l.fleet.TotalDemandRPS
	tc.Swings = []traffic.Swing{{Cluster: "fe-a", Factor: swingFactor, From: swingAt, To: time.Hour}}
	tc.Stream, tc.MeanTurns, tc.MeanThink = false, 3, 500*time.Millisecond
	tc.FirstMessageTokens, tc.MessageTokens, tc.MeanMaxTokens = 200, 40, 20
	gen, err := traffic.New(tc)
	if err != nil {
		return err
	}
	l.gen, l.trafficStart = gen, time.Now()
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- gen.Run(tctx) }()
	<-tctx.Done()
	l.stats = gen.Stats()
	return <-done
}

func waitReady(ctx context.Context, dp *dataplane.DataPlane, f *schemas.Fleet) bool {
	for {
		st, _ := dp.Health().Status()
		ready := true
		for _, c := range f.Clusters {
			ready = ready && st["snapshot:"+c.Name]
		}
		if ready {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// point is fe-a's remote weight in one published snapshot.
type point struct {
	version uint64
	at      time.Duration // since the traffic started
	remote  float64       // Σ weights of fe-a on region-b engines
	demand  float64
}

func remoteSeries(l *loop) []point {
	var out []point
	for _, h := range l.opt.State().History {
		w := h.Weights["fe-a"]
		out = append(out, point{version: h.Version, at: h.Time.Sub(l.trafficStart), remote: w["b-0"] + w["b-1"],
			demand: h.DemandRPS["fe-a"]})
	}
	return out
}

func checkShift(t *testing.T, l *loop) {
	t.Helper()
	if l.gen == nil {
		t.Fatal("the traffic never started: no snapshot reached the data plane")
	}
	series := remoteSeries(l)
	var trace strings.Builder
	for _, p := range series {
		fmt.Fprintf(&trace, "  v%-3d %6.1fs  remote %.3f  demand %.2f\n", p.version, p.at.Seconds(), p.remote, p.demand)
	}
	t.Logf("fe-a's weight on region b per snapshot (swing ×%d at %v):\n%s", swingFactor, swingAt, trace.String())

	// Before the swing fe-a is served at home.
	var pre []float64
	for _, p := range series {
		if p.at > swingAt-6*time.Second && p.at < swingAt {
			pre = append(pre, p.remote)
		}
	}
	if len(pre) == 0 {
		t.Fatal("no snapshot in the 6 s before the swing")
	}
	base := mean(pre)
	if base > 0.2 {
		t.Errorf("before the swing fe-a sends %.2f of its traffic to region b; want it served at home (<= 0.2)", base)
	}
	// Within maxSolves snapshots of the swing, at least shiftBy more moves.
	target := base + shiftBy
	shifted, solves := -1, 0
	for i, p := range series {
		if p.at < swingAt {
			continue
		}
		solves++
		if p.remote >= target {
			shifted = i
			break
		}
	}
	if shifted < 0 || solves > maxSolves {
		t.Fatalf("fe-a's weight on region b did not reach %.2f within %d snapshots of the swing (took %d, shifted=%v)",
			target, maxSolves, solves, shifted >= 0)
	}
	t.Logf("shifted %.2f → %.2f in %d snapshots (%.1f s after the swing)", base, series[shifted].remote, solves,
		(series[shifted].at - swingAt).Seconds())
	checkNoOscillation(t, series[shifted:], target)
	checkRouted(t, l)
}

// checkNoOscillation asserts that once shifted, fe-a's remote weight stays
// shifted and does not swing back and forth: at most one reversal of a
// move larger than the deadband (settling after an overshoot).
func checkNoOscillation(t *testing.T, after []point, target float64) {
	t.Helper()
	reversals, lastSign := 0, 0
	for i := 1; i < len(after); i++ {
		if after[i].remote < target-0.1 {
			t.Errorf("v%d at %.1fs: fe-a's remote weight fell back to %.2f while the demand is still up", after[i].version,
				after[i].at.Seconds(), after[i].remote)
		}
		d := after[i].remote - after[i-1].remote
		if math.Abs(d) < deadband {
			continue
		}
		sign := 1
		if d < 0 {
			sign = -1
		}
		if lastSign != 0 && sign != lastSign {
			reversals++
		}
		lastSign = sign
	}
	t.Logf("after the shift: %d snapshots, %d reversals of moves over %.2f", len(after), reversals, deadband)
	if reversals > 1 {
		t.Errorf("fe-a's remote weight reversed direction %d times after shifting (moves over %.2f): it oscillates", reversals, deadband)
	}
	if len(after) < 3 {
		t.Errorf("only %d snapshots after the shift: too few to judge stability", len(after))
	}
}

// checkRouted asserts the request path followed the weights: a good part
// of fe-a's answered requests came from region b.
func checkRouted(t *testing.T, l *loop) {
	t.Helper()
	var a traffic.ClusterStats
	for _, c := range l.stats.Clusters {
		if c.Cluster == "fe-a" {
			a = c
		}
	}
	remote := a.Engines["b-0"] + a.Engines["b-1"]
	total := remote + a.Engines["a-0"]
	t.Logf("fe-a: %d sent, %d ok, %d shed, %d errors; served by a-0 %d, region b %d", a.Sent, a.OK, a.Shed, a.Errors,
		a.Engines["a-0"], remote)
	if total == 0 || float64(remote)/float64(total) < 0.15 {
		t.Errorf("region b served %d of fe-a's %d answered requests; want at least 15%% after the shift", remote, total)
	}
	if a.Errors > a.Sent/20 {
		t.Errorf("%d of %d fe-a requests failed", a.Errors, a.Sent)
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
