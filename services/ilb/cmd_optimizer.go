package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ilb-router/ilb/schemas"
	svcrun "github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
)

const optimizerAbout = `Runs the optimizer: it reads windowed features (ilb.features) and fitted
profiles (ilb.profiles) from Kafka, estimates each front-end cluster's
demand, derates unhealthy engines, solves the fleet-wide allocation from the
previous solution (so weights move no more than they must), updates each
cluster's selection table with minimal churn, and publishes one snapshot per
cluster plus a manifest to the JetStream KV bucket ilb-weights, versioned
by compare-and-swap on the manifest.

With --clock event (the default) it solves once per feature window, when
the window is complete, on exactly that window's rows: a replay of a
recorded signal stream (ilb replay) publishes the weights the live run
did, window for window; each snapshot says which window in inputs_as_of.
Nothing is re-solved without new windows, so when the signals stop the
data planes see their snapshots age. --clock wall solves when input
arrives (at most every --min-interval) and at least every --max-interval.

Several instances may run: the one holding the lease (--lease) publishes;
the others stand by and take over when it stops. Give each instance its own
--id. Refused NATS credentials end the command (exit 1) with the server's
reason.

HTTP (--http): GET /healthz, GET /v1/optimizer (the last solve: weights,
demand, capacities, history), GET /metrics.`

func cmdOptimizer(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "optimizer", "--fleet FILE [--kafka ADDRS] [--nats URL] [--http ADDR] [flags]", optimizerAbout)
	kf, nf := addKafkaFlags(fs), addNATSFlags(fs)
	cfg := optimizer.DefaultConfig(nil)
	fleet := fs.String("fleet", "", "fleet file (YAML); required")
	httpAddr := fs.String("http", "", "HTTP listen address for /healthz, /v1/optimizer and /metrics (default: none)")
	sf := addServiceFlags(fs, "ilb-optimizer")
	fs.StringVar(&cfg.ID, "id", defaultOptimizerID(), "name of this instance (lease holder, manifest leader); unique per instance")
	fs.StringVar(&cfg.Clock, "clock", cfg.Clock, "what drives the solves: event (one solve per complete feature window, so a replayed recording gives the weights the live run did) or wall (solve when input arrives, at most every --min-interval, and every --max-interval without input)")
	fs.DurationVar(&cfg.TickWait, "tick-wait", cfg.TickWait, "event clock: longest wait for the rest of a window's rows after its first arrived")
	fs.DurationVar(&cfg.MinInterval, "min-interval", cfg.MinInterval, "least time between two solves")
	fs.DurationVar(&cfg.MaxInterval, "max-interval", cfg.MaxInterval, "most time between two published versions (event clock: of event time, while windows arrive)")
	fs.DurationVar(&cfg.LeaseDuration, "lease", cfg.LeaseDuration, "leader lease duration; 0 turns leader election off")
	fs.StringVar(&cfg.Bucket, "bucket", cfg.Bucket, "JetStream KV bucket of the weight snapshots")
	fs.IntVar(&cfg.BucketReplicas, "bucket-replicas", cfg.BucketReplicas, "JetStream replicas of the bucket (3 in production)")
	fs.StringVar(&cfg.FeaturesTopic, "features-topic", cfg.FeaturesTopic, "Kafka topic of the feature windows")
	fs.StringVar(&cfg.ProfilesTopic, "profiles-topic", cfg.ProfilesTopic, "Kafka topic of the fitted profiles")
	fs.Float64Var(&cfg.ChurnMs, "churn-ms", cfg.ChurnMs, "price in ms per request of moving a cluster's whole traffic between engines")
	fs.DurationVar(&cfg.Smooth.Weights, "smooth-weights", cfg.Smooth.Weights, "while a cluster sheds (or shed at the last publish), the time constant with which its published split over the engines follows the solver; 0 publishes each solution as solved")
	fs.DurationVar(&cfg.Smooth.Shed, "smooth-shed", cfg.Smooth.Shed, "the same for its shed fraction; it stops at once when it falls under 0.3% while the solver sheds nothing, and for every cluster once the solver sheds nothing and the fleet's demand is 20% below its level at the last shortfall (the overload has ended)")
	fs.DurationVar(&cfg.Smooth.Reuse, "smooth-reuse", cfg.Smooth.Reuse, "while a cluster sheds nothing, the time constant of its published split when the engines serve 10% or more of the prompt tokens from their prefix caches (shorter in proportion below, --smooth-calm without reuse): moving it moves conversations off the engines that hold their context; it holds after an overload has ended too, when clusters that shed and clusters without reuse publish their solutions as solved; 0 publishes each solution as solved")
	fs.DurationVar(&cfg.Smooth.Calm, "smooth-calm", cfg.Smooth.Calm, "while a cluster sheds nothing, the time constant of its published split when the engines reuse no cache, and the least with reuse: short enough to follow bursts, long enough not to follow each solve's move of the capacity estimates; 0 publishes each solution as solved")
	fs.Float64Var(&cfg.MeanPromptTokens, "mean-prompt-tokens", cfg.MeanPromptTokens, "prompt size assumed by the prior profile of an engine not fitted yet, until the feature windows report the mean request served")
	fs.Float64Var(&cfg.ShapeAlpha, "shape-alpha", cfg.ShapeAlpha, "weight of each solve's new windows in the mean prompt (its size, cached share and second moment) that sizes the prior profiles, in (0, 1]: the prompts of the next seconds are more like the last window's than the last minute's")
	fs.Float64Var(&cfg.ShapeOutputAlpha, "shape-output-alpha", cfg.ShapeOutputAlpha, "the same for the mean answer length, in (0, 1]: known only at completion, and a few long answers swing a window's mean")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *fleet == "" {
		return badInput("--fleet FILE is required (the clusters, engines and network the optimizer allocates over)")
	}
	f, err := schemas.LoadFleet(*fleet)
	if err != nil {
		return badInput("--fleet: %v", err)
	}
	cfg.Fleet = f
	if err := cfg.Validate(); err != nil {
		return badInput("%v", err)
	}
	kc, err := kf.config("ilb-optimizer-" + cfg.ID)
	if err != nil {
		return err
	}
	nc, err := nf.config("ilb-optimizer-" + cfg.ID)
	if err != nil {
		return err
	}
	if _, err := sf.logger(e); err != nil {
		return err
	}
	return runOptimizer(ctx, e, cfg, optimizerDeps{kafka: kc, nats: nc, httpAddr: *httpAddr, svc: sf, fleetPath: *fleet})
}

// optimizerDeps are the connections cmdOptimizer resolved from flags.
type optimizerDeps struct {
	kafka    kafka.ClientConfig
	nats     kv.Config
	httpAddr string
	svc      *serviceFlags
	// fleetPath is watched: changes go to the optimizer (SetFleet).
	fleetPath string
}

func runOptimizer(ctx context.Context, e *env, cfg optimizer.Config, d optimizerDeps) error {
	sv, err := d.svc.start(ctx, e)
	if err != nil {
		return err
	}
	defer sv.close()
	log, tel := sv.log, sv.tel
	d.nats.RetryOnFailedConnect = true // start, and wait for NATS, rather than fail
	d.nats.Logger = log
	conn, js, err := kv.Connect(ctx, d.nats)
	if err != nil {
		return err
	}
	defer conn.Close()
	o, err := optimizer.New(cfg, optimizer.Deps{JetStream: js, NATS: conn, Kafka: &d.kafka, Logger: log,
		Meter: tel.Meter, Tracer: tel.Tracer, Metrics: tel.MetricsHandler()})
	if err != nil {
		return badInput("%v", err)
	}
	var g svcrun.Group
	g.Add("optimizer", o.Run)
	if d.fleetPath != "" {
		apply := func(f *schemas.Fleet) error { return o.SetFleet(ctx, f) }
		if err := watchFleet(ctx, &g, d.fleetPath, log, tel.Meter, apply); err != nil {
			return badInput("--fleet: %v", err)
		}
	}
	where := ""
	if d.httpAddr != "" {
		srv, err := svcrun.Listen(svcrun.DefaultHTTPConfig(d.httpAddr), o.Handler())
		if err != nil {
			return fmt.Errorf("--http %s: %w", d.httpAddr, err)
		}
		g.Add("http", srv.Run)
		where = fmt.Sprintf("; state on http://%s/v1/optimizer", srv.Addr())
	}
	fmt.Fprintf(e.stdout, "ilb optimizer %s: %d clusters, %d engines -> bucket %s%s\n",
		cfg.ID, len(cfg.Fleet.Clusters), len(cfg.Fleet.Engines), cfg.Bucket, where)
	return g.Run(ctx)
}

// defaultOptimizerID is host-pid: unique per process, readable in the
// manifest.
func defaultOptimizerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "optimizer"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
