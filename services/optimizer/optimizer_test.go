package optimizer

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// exampleDemand is the example fleet's own split of its 12 rps.
var exampleDemand = map[string]float64{"fe-east": 5.4, "fe-west": 1.2, "fe-eu": 3}

// TestOptimizerPublishesEveryCluster runs the service on real brokers: it
// publishes from priors before any window, then from the traffic the
// windows show, a valid snapshot with a table for every cluster and a
// manifest at the same fleet-wide version; a fitted profile replaces the
// prior.
func TestOptimizerPublishesEveryCluster(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	b := newBrokers(t)
	cfg := testConfig(f, "opt-0")
	cfg.LeaseDuration = time.Second
	o, _ := b.start(t, cfg)
	waitFor(t, 10*time.Second, "the first (prior) version", func() bool { return b.version(t) >= 1 })
	man, snaps := b.served(t, f)
	b.produceFeatures(t, trafficRows(f, 1, exampleDemand, weightsOf(snaps)))
	waitFor(t, 10*time.Second, "a version from the first window", func() bool { return b.version(t) > man.Version })
	// A trigger (the lease, say) may re-solve and publish once more: read
	// the bucket and the state until they show the same version.
	var st *State
	waitFor(t, 5*time.Second, "the state of the served version", func() bool {
		man, snaps = b.served(t, f)
		st = o.State()
		return st.Version == man.Version
	})
	if man.Leader != "opt-0" {
		t.Errorf("manifest leader %q", man.Leader)
	}
	for _, c := range f.Clusters {
		checkServed(t, f, c, snaps[c.Name], man.Version)
	}
	if st.Version != man.Version || !st.Leader || len(st.Clusters) != 3 || len(st.Engines) != 6 || len(st.History) < 2 {
		t.Fatalf("state: version %d leader %v, %d clusters, %d engines, %d history points",
			st.Version, st.Leader, len(st.Clusters), len(st.Engines), len(st.History))
	}
	if d := st.Clusters[0].DemandRPS; st.Clusters[0].Name != "fe-east" || math.Abs(d-5.4) > 1e-9 {
		t.Errorf("fe-east demand %v, want the first window's 5.4", d)
	}
	checkHTTP(t, o, man.Version)

	fitted := schemas.Profile{Engine: "east-h100-0", SKU: "h100", FittedAtUnixNano: 1, CapacityRPS: 3,
		TTFTBaseMs: 140, TTFTQueueMs: 30, TBOTBaseMs: 30, TBOTSlopeMs: 40, Samples: 20, LoadMinRPS: 1, LoadMaxRPS: 4}
	b.produceProfiles(t, []schemas.Profile{fitted})
	// The event clock uses a fit from the first window solved after it
	// arrived; windows keep coming, as from an aggregator.
	k := 2
	var last time.Time
	waitFor(t, 10*time.Second, "the fitted profile in use", func() bool {
		if cfg.Clock == ClockEvent && time.Since(last) > 300*time.Millisecond {
			b.produceFeatures(t, trafficRows(f, k, exampleDemand, weightsOf(snaps)))
			k, last = k+1, time.Now()
		}
		e := o.State().Engines[0]
		return e.Name == "east-h100-0" && e.Profile == sourceFitted && e.BaseCapacityRPS == 3
	})
	// The state carries the model in force and its predictions at the
	// planned load: the page's calibration table reads them.
	e := o.State().Engines[0]
	if m := e.Model; m == nil || m.CapacityRps != e.CapacityRPS || m.TTFT.BaseMs != 140 || m.TBOT.SlopeMs != 40 {
		t.Fatalf("engine %s model %+v, want the fitted profile at capacity %v", e.Name, m, e.CapacityRPS)
	}
	// And the load each engine was capped at to serve within the TBOT SLO,
	// as the solve had it (none for the fit, whose TBOT stays under it up
	// to max_utilization; the a100s' priors are capped).
	nCapped := 0
	for _, x := range o.State().Engines {
		if x.Model == nil {
			continue
		}
		if x.Model.MaxLoadRps > 0 {
			nCapped++
		}
		want := *x.Model
		want.MaxLoadRps = 0
		if got, w := x.Model.MaxLoadRps, routing.SLOLoad(want, f.TBOTSLOMs, f.MaxUtilization); got != w {
			t.Errorf("engine %s: model max_load_rps %v, want SLOLoad %v", x.Name, got, w)
		}
	}
	if nCapped == 0 { // the example fleet's a100s are, at their priors
		t.Error("no engine capped at its SLO load: the check above proves nothing")
	}
	rho := min(e.LoadRPS/e.CapacityRPS, 0.99)
	if wt, wb := 140+30*rho/(1-rho), 30+40*rho; math.Abs(e.PredictedTTFTMs-wt) > 1e-9 || math.Abs(e.PredictedTBOTMs-wb) > 1e-9 {
		t.Errorf("predicted TTFT %v TBOT %v at %v rps, want %v and %v", e.PredictedTTFTMs, e.PredictedTBOTMs, e.LoadRPS, wt, wb)
	}
}

// checkServed checks one cluster's snapshot: at the manifest's version,
// weights only on engines the cluster may use, and a table that matches
// the weights.
func checkServed(t *testing.T, f *schemas.Fleet, c schemas.FleetCluster, s *schemas.Snapshot, version uint64) {
	t.Helper()
	if s.Version != version || s.CreatedAt.IsZero() || s.InputsDigest == "" {
		t.Errorf("%s: version %d (manifest %d), created %v, digest %q", c.Name, s.Version, version, s.CreatedAt, s.InputsDigest)
	}
	for e := range s.Weights {
		fe, ok := f.Engine(e)
		if !ok || !f.Eligible(c, fe) {
			t.Errorf("%s: weight on %s, which it may not use", c.Name, e)
		}
	}
	// Local admission limits for every engine it may use: capacity × SLO
	// requests, and prefill rate × replicas × SLO prompt tokens.
	for _, fe := range f.Engines {
		l, ok := s.QueueLimits[fe.Name]
		if f.Eligible(c, fe) != ok || (ok && !(l >= 1)) {
			t.Errorf("%s: queue limit of %s %v (present %v), eligible %v", c.Name, fe.Name, l, ok, f.Eligible(c, fe))
		}
		pl, ok := s.PrefillLimits[fe.Name]
		want := fe.PrefillTokensPerS * float64(max(fe.Replicas, 1)) * f.TTFTSLOMs / 1000
		if f.Eligible(c, fe) != ok || (ok && math.Abs(pl-want) > 1e-6*want) {
			t.Errorf("%s: prefill limit of %s %v (present %v), want %v, eligible %v", c.Name, fe.Name, pl, ok, want, f.Eligible(c, fe))
		}
	}
	if s.Table == nil {
		t.Fatalf("%s: no table", c.Name)
	}
	tab, err := sched.Decode(s.Table.Slots, s.Table.Engines, s.Table.Encoding, s.Table.Data)
	if err != nil {
		t.Fatalf("%s: table: %v", c.Name, err)
	}
	shares := tab.Weights()
	for i, e := range tab.Engines() {
		want := s.Weights[e] / (1 - s.ShedFraction)
		if math.Abs(shares[i]-want) > 2.0/float64(tab.Slots()) {
			t.Errorf("%s: table gives %s %.5f of the slots, weights say %.5f", c.Name, e, shares[i], want)
		}
	}
}

func checkHTTP(t *testing.T, o *Optimizer, version uint64) {
	t.Helper()
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/optimizer")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/optimizer: %d %v", resp.StatusCode, err)
	}
	if st.Version < version || len(st.Clusters) != 3 || st.Clusters[0].Weights == nil {
		t.Errorf("GET /v1/optimizer: %+v", st)
	}
	h, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	h.Body.Close()
	if h.StatusCode != 200 {
		t.Errorf("GET /healthz: %d", h.StatusCode)
	}
}

// closedLoop feeds the optimizer windows of traffic that follow the
// weights it publishes, as data planes and engines would, one window per
// solve, and records each cluster's weights after every window.
type closedLoop struct {
	t      *testing.T
	f      *schemas.Fleet
	b      *brokers
	k      int
	series []map[string]*schemas.Snapshot
}

// step sends window k with the given demand (down engines report
// unhealthy) and waits for the version it causes.
func (l *closedLoop) step(demand map[string]float64, down ...string) map[string]*schemas.Snapshot {
	l.t.Helper()
	man, snaps := l.b.served(l.t, l.f)
	l.b.produceFeatures(l.t, trafficRows(l.f, l.k, demand, weightsOf(snaps), down...))
	l.k++
	waitFor(l.t, 10*time.Second, "the next version", func() bool { return l.b.version(l.t) > man.Version })
	_, snaps = l.b.served(l.t, l.f)
	l.series = append(l.series, snaps)
	return snaps
}

// remote is the weight of fe-west's traffic sent out of west-us.
func remote(s *schemas.Snapshot) float64 {
	return 1 - s.ShedFraction - s.Weights["west-a100-0"]
}

// TestOptimizerDemandSwing: fe-west's demand triples, beyond the one
// engine in west-us. Within a bounded number of solves its weights move
// to spare capacity in east-us, and then stay: no swing back and forth.
// The row sheds nothing and its engines reuse no cache here, so its split
// moves with routing.SmoothConfig.Calm (20 s, two windows): six solves
// take it 95% of the way (four did when it was published as solved).
func TestOptimizerDemandSwing(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	b := newBrokers(t)
	b.start(t, testConfig(f, "opt-0"))
	waitFor(t, 10*time.Second, "the first version", func() bool { return b.version(t) >= 1 })
	l := &closedLoop{t: t, f: f, b: b}
	for range 4 {
		l.step(exampleDemand)
	}
	r0 := remote(l.series[len(l.series)-1]["fe-west"])
	swing := map[string]float64{"fe-east": 5.4, "fe-west": 3.6, "fe-eu": 3}
	const settle, after = 6, 8
	var series []float64
	for range settle + after {
		series = append(series, remote(l.step(swing)["fe-west"]))
	}
	t.Logf("fe-west's remote share: %.3f before the swing, then per solve %.3f", r0, series)
	final := l.series[len(l.series)-1]["fe-west"]
	moved := series[len(series)-1] - r0
	// H100s in east-us decode faster than west-us's one A100, so fe-west
	// sends part of its traffic east even before the swing (72 ms of
	// network is small next to 200 decode steps); the swing must add to it.
	if moved < 0.15 || final.ShedFraction > 0.02 {
		t.Fatalf("fe-west's remote share went from %.2f to %.2f, shedding %.3f; want at least 0.15 more and no shedding (weights %v)",
			r0, series[len(series)-1], final.ShedFraction, final.Weights)
	}
	if got := series[settle-1] - r0; got < 0.9*moved {
		t.Errorf("after %d solves only %.2f of the %.2f move is done", settle, got, moved)
	}
	east := final.Weights["east-h100-0"] + final.Weights["east-h100-1"] + final.Weights["east-a100-0"]
	if eu := final.Weights["eu-h100-0"] + final.Weights["eu-a100-0"]; east <= eu {
		t.Errorf("fe-west spills more to west-europe (151 ms) than to east-us (72 ms): %v", final.Weights)
	}
	// No oscillation: once settled the share does not turn back, and each
	// solve moves it by less than 2 points.
	turns := 0
	for i := settle + 1; i < len(series); i++ {
		d0, d1 := series[i-1]-series[i-2], series[i]-series[i-1]
		if math.Abs(d0) > 0.01 && math.Abs(d1) > 0.01 && d0*d1 < 0 {
			turns++
		}
		if math.Abs(d1) > 0.02 {
			t.Errorf("solve %d after settling moved fe-west's remote share by %.3f", i, d1)
		}
	}
	if turns > 0 {
		t.Errorf("the remote share turned direction %d times after settling: %.3f", turns, series)
	}
	if d := series[len(series)-1] - series[0]; d < -0.02 {
		t.Errorf("the remote share fell back from %.3f to %.3f", series[0], series[len(series)-1])
	}
}

// TestOptimizerUnhealthyEngine: an engine reported unhealthy gets no
// weight in the next snapshot of any cluster.
func TestOptimizerUnhealthyEngine(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	b := newBrokers(t)
	o, _ := b.start(t, testConfig(f, "opt-0"))
	waitFor(t, 10*time.Second, "the first version", func() bool { return b.version(t) >= 1 })
	l := &closedLoop{t: t, f: f, b: b}
	snaps := l.step(exampleDemand)
	if snaps["fe-east"].Weights["east-h100-0"] == 0 {
		t.Fatalf("healthy east-h100-0 has no weight in fe-east: %v", snaps["fe-east"].Weights)
	}
	snaps = l.step(exampleDemand, "east-h100-0")
	for c, s := range snaps {
		if w := s.Weights["east-h100-0"]; w != 0 {
			t.Errorf("%s: weight %v on the unhealthy engine", c, w)
		}
		if tab := s.Table; tab != nil && slices.Contains(tab.Engines, "east-h100-0") {
			t.Errorf("%s: the table still lists the unhealthy engine", c)
		}
	}
	v := snaps["fe-east"].Version
	waitFor(t, 5*time.Second, "the state of the version", func() bool { return o.State().Version >= v })
	e := o.State().Engines[0]
	if e.Name != "east-h100-0" || e.CapacityRPS != 0 || !slices.Equal(e.Derate, []string{derateUnhealthy}) {
		t.Errorf("state of the unhealthy engine: %+v", e)
	}
	snaps = l.step(exampleDemand) // healthy again
	if snaps["fe-east"].Weights["east-h100-0"] == 0 {
		t.Errorf("recovered east-h100-0 gets no weight back: %v", snaps["fe-east"].Weights)
	}
}
