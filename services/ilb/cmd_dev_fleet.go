package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/aggregator"
	"github.com/ilb-router/ilb/services/console"
	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/enginesim"
	svcrun "github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/services/internal/telemetry"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/services/traffic"
	"github.com/ilb-router/ilb/streams/embedded"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
)

// devFleet is the local fleet's services, built and ready to run.
type devFleet struct {
	plan    devPlan
	brokers *embedded.Brokers
	nc      *nats.Conn
	js      jetstream.JetStream
	tel     *telemetry.Telemetry
	health  *svcrun.Health
	log     *slog.Logger

	sim     *enginesim.Sim
	agg     *aggregator.Aggregator
	opt     *optimizer.Optimizer
	dp      *dataplane.DataPlane
	console *console.Console
	gen     *traffic.Generator
	srv     *svcrun.Server
	members *devMembers     // live fleet membership (cmd_dev_members.go)
	ctx     context.Context // runDev's, for the members' optimizer calls
}

// runDev brings the fleet up, tells the user where it is, and runs it
// until ctx ends or a part fails; then it stops everything, services
// first and brokers last.
func runDev(ctx context.Context, e *env, p devPlan) error {
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: p.level}))
	tel, err := telemetry.Setup(ctx, telemetry.DefaultConfig("ilb-dev"))
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)
	d := &devFleet{plan: p, tel: tel, health: svcrun.NewHealth(), log: log, ctx: ctx}
	if err := d.startBrokers(ctx); err != nil {
		return err
	}
	defer d.brokers.Close()
	nc := kv.DefaultConfig()
	nc.URL, nc.Name = d.brokers.NATSURL(), "ilb-dev"
	if d.nc, d.js, err = kv.Connect(ctx, nc); err != nil {
		return fmt.Errorf("connect to the embedded NATS: %w", err)
	}
	defer d.nc.Close()
	// The optimizer would create the bucket too; creating it first spares
	// the data plane a "bucket not found" warning at every start.
	if _, err := optimizer.EnsureWeightsBucket(ctx, d.js, schemas.BucketWeights, p.natsReplicas); err != nil {
		return fmt.Errorf("create the weights bucket: %w", err)
	}
	if err := d.build(); err != nil {
		return err
	}
	printDevBanner(e, d)
	if p.readyFile != "" {
		if err := writeReadyFile(p.readyFile, d.readyInfo()); err != nil {
			return err
		}
	}
	g := svcrun.Group{ShutdownTimeout: p.shutdownWait}
	d.addTo(&g, e)
	if p.fleetPath != "" {
		if err := watchFleet(ctx, &g, p.fleetPath, log, tel.Meter, d.members.apply); err != nil {
			return badInput("--fleet: %v", err)
		}
	}
	var sk *soak
	if p.duration > 0 {
		sk = newSoak(d, p.duration)
		sk.profilePrefix = p.heapProfile
		g.Add("soak", sk.run)
	}
	err = g.Run(ctx)
	fmt.Fprintln(e.stderr, "ilb dev: stopped")
	if sk != nil && err == nil {
		r := sk.report()
		r.write(e.stdout)
		if r.Traffic.Errors > 0 {
			return fmt.Errorf("soak: %d requests failed", r.Traffic.Errors)
		}
	}
	return err
}

func shutdownTelemetry(tel *telemetry.Telemetry) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tel.Shutdown(ctx)
}

func (d *devFleet) startBrokers(ctx context.Context) error {
	cfg := embedded.DefaultConfig()
	cfg.KafkaListen, cfg.NATSListen = d.plan.kafkaListen, d.plan.natsListen
	if d.plan.natsCluster > 1 {
		// Route ports are free ones: nobody connects to them from outside.
		cfg.NATSCluster, cfg.NATSClusterListen, cfg.SyncAlways = d.plan.natsCluster, "127.0.0.1:0", true
	}
	cfg.Topics = append(embedded.DefaultTopics(), aggregator.TopicProfiles)
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Logger = d.log.With("service", "brokers")
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	b, err := embedded.Start(ctx, cfg)
	switch {
	case err == nil:
		d.brokers = b
		return nil
	case strings.Contains(err.Error(), "kafka listen"):
		return listenError(err, "--kafka-listen", cfg.KafkaListen)
	case strings.Contains(err.Error(), "nats"):
		return listenError(err, "--nats-listen", cfg.NATSListen)
	}
	return err
}

// kafkaConfig is a client config for the embedded broker.
func (d *devFleet) kafkaConfig(id string) kafka.ClientConfig {
	c := kafka.DefaultClientConfig()
	c.Brokers, c.ClientID = d.brokers.KafkaAddrs(), id
	return c
}

// build creates every service, and the HTTP server that fronts them.
func (d *devFleet) build() error {
	steps := []func() error{d.buildSim, d.buildAggregator, d.buildOptimizer, d.buildDataPlane, d.buildConsole, d.buildServer, d.buildTraffic}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func (d *devFleet) buildSim() error {
	cfg := enginesim.DefaultConfig()
	cfg.Fleet, cfg.HTTPAddr, cfg.Seed, cfg.TimeScale = d.plan.fleet, "127.0.0.1:0", d.plan.seed, d.plan.timeScale
	cfg.DrainTimeout = d.plan.drainTimeout
	cfg.Kafka = d.kafkaConfig("ilb-dev-engine-sim")
	cfg.Logger = d.log.With("service", "engine-sim")
	cfg.MeterProvider, cfg.TracerProvider = d.tel.Meter, d.tel.Tracer
	sim, err := enginesim.New(cfg)
	if err != nil {
		return fmt.Errorf("engine-sim: %w", err)
	}
	d.sim = sim
	return nil
}

func (d *devFleet) buildAggregator() error {
	cfg := aggregator.DefaultConfig()
	cfg.Kafka = d.kafkaConfig("ilb-dev-aggregator")
	cfg.ConfigFromFleet(d.plan.fleet)
	cfg.Window, cfg.ProfileInterval = d.plan.window, d.plan.profileEvery
	agg, err := aggregator.New(cfg, aggregator.Deps{Logger: d.log.With("service", "aggregator"),
		Tracer: d.tel.Tracer, Meter: d.tel.Meter, Health: d.health})
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	d.agg = agg
	return nil
}

func (d *devFleet) buildOptimizer() error {
	cfg := optimizer.DefaultConfig(d.plan.fleet)
	cfg.ID, cfg.TickWait, cfg.BucketReplicas = "ilb-dev", d.plan.tickWait, d.plan.natsReplicas
	kc := d.kafkaConfig("ilb-dev-optimizer")
	opt, err := optimizer.New(cfg, optimizer.Deps{JetStream: d.js, NATS: d.nc, Kafka: &kc,
		Logger: d.log.With("service", "optimizer"), Meter: d.tel.Meter, Tracer: d.tel.Tracer, Health: d.health})
	if err != nil {
		return fmt.Errorf("optimizer: %w", err)
	}
	d.opt = opt
	return nil
}

func (d *devFleet) buildDataPlane() error {
	cfg := dataplane.DefaultConfig()
	cfg.EngineURLs, cfg.EngineCapacity = map[string]string{}, map[string]int{}
	for _, c := range d.plan.fleet.Clusters {
		cfg.Clusters = append(cfg.Clusters, c.Name)
	}
	// An unmodified OpenAI client names no cluster: it is served as the
	// fleet's first.
	cfg.DefaultCluster = cfg.Clusters[0]
	for _, e := range d.plan.fleet.Engines {
		cfg.EngineURLs[e.Name] = d.sim.BaseURL(e.Name)
		cfg.EngineCapacity[e.Name] = max(1, e.MaxBatch) * max(1, e.Replicas)
	}
	fleetModels(&cfg, d.plan.fleet, false)
	cfg.DrainTimeout = d.plan.drainTimeout
	kc := d.kafkaConfig("ilb-dev-dataplane")
	dp, err := dataplane.New(cfg, dataplane.Deps{Logger: d.log.With("service", "dataplane"), Tracer: d.tel.Tracer,
		Meter: d.tel.Meter, Metrics: d.tel.MetricsHandler(), JetStream: d.js, NATS: d.nc, Kafka: &kc, Health: d.health})
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	d.dp = dp
	return nil
}

func (d *devFleet) buildConsole() error {
	cfg := console.DefaultConfig(d.plan.fleet)
	cfg.Links = d.links()
	cfg.MembersURL = "/v1/dev/engines" // devMembers.mount
	cfg.Logger = d.log.With("service", "console")
	c, err := console.New(cfg, console.Sources{Plan: optimizerPlan{d.opt}, Routing: dataplaneRouting{d.dp},
		Engines: aggregatorEngines{d.agg}, Traffic: trafficSource{d}})
	if err != nil {
		return err
	}
	d.console = c
	return nil
}

// buildServer binds the page's address and mounts every service's API.
func (d *devFleet) buildServer() error {
	mux := http.NewServeMux()
	ch := d.console.Handler()
	mux.Handle("GET /{$}", ch)
	mux.Handle("GET /api/state", ch)
	for _, path := range []string{"/v1/routing", "/v1/pick", "/v1/chat/completions", "/v1/completions",
		"/v1/embeddings", "/v1/models", "/v1/models/", "/metrics"} {
		mux.Handle(path, d.dp.Handler())
	}
	mux.Handle("GET /healthz", d.health)
	mux.Handle("/v1/features", d.agg.Handler())
	mux.Handle("/v1/profiles", d.agg.Handler())
	mux.Handle("/v1/optimizer", d.opt.Handler())
	mux.Handle("/engines", d.sim.Handler())
	mux.Handle("/engines/", d.sim.Handler())
	d.members = newDevMembers(d)
	d.members.mount(mux)
	srv, err := svcrun.Listen(svcrun.DefaultHTTPConfig(d.plan.httpAddr), mux)
	if err != nil {
		return listenError(err, "--http", d.plan.httpAddr)
	}
	d.srv = srv
	return nil
}

func (d *devFleet) buildTraffic() error {
	cfg := traffic.DefaultConfig()
	cfg.BaseURL = "http://" + reachable(d.srv.Addr())
	cfg.Clusters = traffic.ClustersOf(d.plan.fleet)
	cfg.TotalDemandRPS, cfg.Swings, cfg.Seed = d.plan.rateRPS, d.plan.swings, d.plan.seed
	cfg.SLO = traffic.SLOOf(d.plan.fleet)
	cfg.Logger, cfg.MeterProvider = d.log.With("service", "traffic"), d.tel.Meter
	g, err := traffic.New(cfg)
	if err != nil {
		return badInput("%v", err)
	}
	d.gen = g
	return nil
}

// addTo registers the services with g. The traffic generator waits for
// the engines to start; everything else starts at once and waits for its
// inputs itself.
func (d *devFleet) addTo(g *svcrun.Group, e *env) {
	g.Add("engine-sim", d.sim.Run)
	g.Add("aggregator", d.agg.Run)
	g.Add("optimizer", d.opt.Run)
	g.Add("dataplane", d.dp.Run)
	g.Add("console", d.console.Run)
	g.Add("http", d.srv.Run)
	g.Add("traffic", func(ctx context.Context) error {
		if !d.waitForSnapshots(ctx) {
			return nil
		}
		return d.gen.Run(ctx)
	})
	if d.plan.progress > 0 {
		g.Add("progress", func(ctx context.Context) error { return d.reportProgress(ctx, e) })
	}
	// The brokers are not in the group: they close after it has stopped,
	// so that the services flush to them on the way out.
}

// waitForSnapshots waits until the engines run and the data plane has a
// snapshot for every cluster, so that the first requests are routed, not
// refused; false when ctx ends first.
func (d *devFleet) waitForSnapshots(ctx context.Context) bool {
	select {
	case <-d.sim.Ready():
	case <-ctx.Done():
		return false
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		status, _ := d.dp.Health().Status()
		ready := true
		for _, c := range d.plan.fleet.Clusters {
			ready = ready && status["snapshot:"+c.Name]
		}
		if ready {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func (d *devFleet) links() []console.Link {
	kafkaAddr := d.brokers.KafkaAddrs()[0]
	first := d.plan.fleet.Clusters[0].Name
	return []console.Link{
		{Name: "kafka", URL: kafkaAddr, Hint: "kcat -b " + kafkaAddr + " -C -t " + schemas.TopicSignals},
		{Name: "nats", URL: d.brokers.NATSURL(), Hint: "nats --server " + d.brokers.NATSURL() + " kv get " + schemas.BucketWeights + " " + first},
		{Name: "metrics", URL: "/metrics"},
	}
}

func (d *devFleet) readyInfo() readyInfo {
	addr := reachable(d.srv.Addr())
	return readyInfo{HTTP: addr, Page: "http://" + addr + "/", Kafka: d.brokers.KafkaAddrs()[0],
		NATS: d.brokers.NATSURL(), Engines: "http://" + d.sim.Addr() + "/engines"}
}

// reachable turns a bound address on all interfaces (":8080",
// "[::]:8080", "0.0.0.0:8080") into one this machine can connect to and a
// user can paste into a browser.
func reachable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
