package integration

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/aggregator"
	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/enginesim"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
)

// Starting the real services for the fault tests, with the short
// intervals that let a fault and its recovery play out in seconds. Each
// service gets its own broker connections, as a separate process would,
// so stopping it drops them.

// allTopics are the Kafka topics the services use.
var allTopics = []string{schemas.TopicSignals, schemas.TopicSignalsDLQ, schemas.TopicFeatures, aggregator.TopicProfiles}

// smallFleet is one region, one front-end cluster and three small
// engines that a few requests per second keep busy.
var smallFleet = smallFleetHead + smallEngines

const smallFleetHead = `
max_utilization: 0.8
block_tokens: 16
mean_output_tokens: 20
total_demand_rps: 6
network_ms:
  r: {r: 1}
clusters:
  - {name: fe-a, region: r, demand_share: 1}
engines:
`

// smallEngines are three engines of about 7 requests/s each for a
// 300-token prompt and 20 output tokens.
var smallEngines = engineLines("e", "r", 3, smallEngine)

// smallEngine is the flow-style body of one small engine.
const smallEngine = "sku: small, prefill_tokens_per_s: 20000, decode_step_ms: {base: 20, per_seq: 1}, max_batch: 4, kv_cache_tokens: 100000"

// optimizerRun is a running optimizer and its own NATS connection.
type optimizerRun struct {
	o  *optimizer.Optimizer
	nc *nats.Conn
	s  *svc
}

// fastOptimizer returns an optimizer configuration that solves at least
// every 500 ms (so versions move on even without new input) with a 1 s
// leader lease.
func fastOptimizer(fleet *schemas.Fleet, id string) optimizer.Config {
	oc := optimizer.DefaultConfig(fleet)
	oc.ID = id
	// Most fault tests run no signal path, and need versions anyway: the
	// wall clock re-solves and publishes every MaxInterval without input
	// (the event clock, the default, publishes only on new windows; the
	// loop test and TestBinary run it with a real signal path).
	oc.Clock = optimizer.ClockWall
	oc.MinInterval, oc.MaxInterval, oc.SettleDelay = 100*time.Millisecond, 500*time.Millisecond, 20*time.Millisecond
	oc.LeaseDuration, oc.PublishTimeout = time.Second, 2*time.Second
	return oc
}

// startOptimizer runs an optimizer with its own NATS connection to
// natsURL and Kafka client config for brokers.
func startOptimizer(t testing.TB, oc optimizer.Config, brokers []string, natsURL string, mt *meter, log *slog.Logger) *optimizerRun {
	t.Helper()
	ncfg := natsConfig(natsURL, oc.ID)
	ncfg.Logger = log
	nc, js := connectNATSKV(t, ncfg)
	kc := kafkaConfig(brokers, oc.ID)
	deps := optimizer.Deps{JetStream: js, NATS: nc, Kafka: &kc, Logger: log}
	if mt != nil {
		deps.Meter = mt.mp
	}
	return runOptimizer(t, oc, deps)
}

// runOptimizer runs an optimizer with the given dependencies.
func runOptimizer(t testing.TB, oc optimizer.Config, deps optimizer.Deps) *optimizerRun {
	t.Helper()
	o, err := optimizer.New(oc, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &optimizerRun{o: o, nc: deps.NATS, s: runSvc(t, oc.ID, o.Run)}
}

// crash stops the optimizer the way a killed process goes: its NATS
// connection drops first, so it cannot release its lease or finish a
// publish, then its goroutines end.
func (r *optimizerRun) crash(t testing.TB) {
	t.Helper()
	r.nc.Close()
	r.s.stop(t)
}

// dataplaneRun is a running data plane served over HTTP.
type dataplaneRun struct {
	d   *dataplane.DataPlane
	nc  *nats.Conn // nil without NATS
	s   *svc
	url string
}

// fastDataplane returns a data plane configuration for clusters with a
// 100 ms owner tick and the given stale-after.
func fastDataplane(staleAfter time.Duration, clusters ...string) dataplane.Config {
	dc := dataplane.DefaultConfig()
	dc.Clusters = clusters
	dc.StaleAfter, dc.TickInterval = staleAfter, 100*time.Millisecond
	return dc
}

// dataplaneDeps says which brokers a test data plane uses.
type dataplaneDeps struct {
	natsURL string              // "" : no KV watch (unless nats is set)
	nats    *kv.Config          // the watch's connection config, instead of natsURL
	brokers []string            // nil: no status consumer (unless kafka is set)
	kafka   *kafka.ClientConfig // the status consumer's config, instead of brokers
	meter   *meter
	log     *slog.Logger
	name    string
}

// startDataplane runs a data plane and serves its Handler.
func startDataplane(t testing.TB, dc dataplane.Config, dd dataplaneDeps) *dataplaneRun {
	t.Helper()
	deps := dataplane.Deps{Logger: dd.log}
	if dd.meter != nil {
		deps.Meter = dd.meter.mp
	}
	r := &dataplaneRun{}
	if dd.natsURL != "" || dd.nats != nil {
		ncfg := natsConfig(dd.natsURL, dd.name)
		if dd.nats != nil {
			ncfg = *dd.nats
		}
		ncfg.Logger = dd.log
		nc, js := connectNATSKV(t, ncfg)
		deps.JetStream, deps.NATS, r.nc = js, nc, nc
	}
	switch {
	case dd.kafka != nil:
		deps.Kafka = dd.kafka
	case dd.brokers != nil:
		kc := kafkaConfig(dd.brokers, dd.name)
		deps.Kafka = &kc
	}
	d, err := dataplane.New(dc, deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	r.d, r.url = d, srv.URL
	r.s = runSvc(t, dd.name, d.Run)
	return r
}

// equalSnapshot is version 1 of cluster with equal weights on every
// engine of the fleet.
func equalSnapshot(fleet *schemas.Fleet, cluster string) *schemas.Snapshot {
	w := map[string]float64{}
	for _, e := range fleet.Engines {
		w[e.Name] = 1 / float64(len(fleet.Engines))
	}
	return &schemas.Snapshot{Version: 1, Cluster: cluster, CreatedAt: time.Now().UTC(), Weights: w}
}

// ready reports whether the data plane has a snapshot for cluster.
func (r *dataplaneRun) ready(cluster string) bool {
	st, _ := r.d.Health().Status()
	return st["snapshot:"+cluster]
}

// startSim runs simulated engines listening on a random port, publishing
// signals to brokers (none: no Kafka).
func startSim(t testing.TB, sc enginesim.Config, brokers []string) (*enginesim.Sim, *svc) {
	t.Helper()
	sc.HTTPAddr = "127.0.0.1:0"
	sc.Kafka.Brokers = nil
	if brokers != nil {
		sc.Kafka = kafkaConfig(brokers, "enginesim")
	}
	sim, err := enginesim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	s := runSvc(t, "enginesim", sim.Run)
	select {
	case <-sim.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("enginesim did not start")
	}
	return sim, s
}

// engineURLs maps every simulated engine to its base URL.
func engineURLs(sim *enginesim.Sim) map[string]string {
	out := map[string]string{}
	for _, name := range sim.EngineNames() {
		out[name] = sim.BaseURL(name)
	}
	return out
}

// fastAggregator returns an aggregator configuration with tumbling
// windows of window, emitted 200 ms of event time after they end.
func fastAggregator(fleet *schemas.Fleet, brokers []string, group string, window time.Duration) aggregator.Config {
	ac := aggregator.DefaultConfig()
	ac.Kafka = kafkaConfig(brokers, group)
	ac.Group = group
	ac.ConfigFromFleet(fleet)
	ac.Window, ac.Hop, ac.OutOfOrder, ac.AllowedLateness = window, 0, 100*time.Millisecond, 100*time.Millisecond
	ac.PollInterval, ac.CommitInterval, ac.PublishTimeout = 100*time.Millisecond, 200*time.Millisecond, 2*time.Second
	ac.SessionTimeout, ac.HeartbeatInterval = 6*time.Second, 500*time.Millisecond
	ac.ProfileInterval = time.Hour
	return ac
}

// startAggregator runs an aggregator.
func startAggregator(t testing.TB, ac aggregator.Config, mt *meter, log *slog.Logger) (*aggregator.Aggregator, *svc) {
	t.Helper()
	deps := aggregator.Deps{Logger: log}
	if mt != nil {
		deps.Meter = mt.mp
	}
	a, err := aggregator.New(ac, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a, runSvc(t, ac.Group, a.Run)
}

// shortCtx is a context for one-off broker calls, cancelled with the test.
func shortCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// load sends requests at a fixed rate, each in its own goroutine (open
// loop: a slow answer does not slow the arrivals), and records the
// answers.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	answers []timedAnswer
	failed  int // no answer at all
}

// timedAnswer is one answer and when its request was sent.
type timedAnswer struct {
	chatAnswer
	At time.Time
}

// startLoad calls send(i) rps times a second until stopped.
func startLoad(t testing.TB, rps float64, send func(ctx context.Context, c *http.Client, i int) (chatAnswer, error)) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	c := httpClient(t, 20*time.Second)
	l.wg.Go(func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rps))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l.wg.Go(func() {
				at := time.Now()
				a, err := send(ctx, c, i)
				l.mu.Lock()
				defer l.mu.Unlock()
				switch {
				case err == nil:
					l.answers = append(l.answers, timedAnswer{chatAnswer: a, At: at})
				case ctx.Err() == nil:
					l.failed++
				}
			})
		}
	})
	t.Cleanup(l.stop)
	return l
}

// stop ends the arrivals and waits for the requests in flight.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// loadCounts summarises a load's answers.
type loadCounts struct {
	Sent, OK, Failed int // Failed: no answer or a status other than 200 and 429
	Shed             int // 429
	Codes            map[int]int
}

func (l *load) counts() loadCounts {
	return l.countsSince(time.Time{})
}

// countsSince counts the requests sent at or after from.
func (l *load) countsSince(from time.Time) loadCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	lc := loadCounts{Failed: l.failed, Codes: map[int]int{}}
	if !from.IsZero() {
		lc.Failed = 0
	}
	lc.Sent = lc.Failed
	for _, a := range l.answers {
		if !a.At.Before(from) {
			lc.add(a.Code)
		}
	}
	return lc
}

// add counts one answer with HTTP status code (Codes must not be nil).
func (lc *loadCounts) add(code int) {
	lc.Sent++
	lc.Codes[code]++
	switch code {
	case http.StatusOK:
		lc.OK++
	case http.StatusTooManyRequests:
		lc.Shed++
	default:
		lc.Failed++
	}
}

// answersSince returns a copy of the answers to requests sent at or
// after from.
func (l *load) answersSince(from time.Time) []timedAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []timedAnswer
	for _, a := range l.answers {
		if !a.At.Before(from) {
			out = append(out, a)
		}
	}
	return out
}
