package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/aggregator"
	svcrun "github.com/ilb-router/ilb/services/internal/run"
)

const aggregatorAbout = `Runs the aggregator: it consumes engine signal events (ilb.signals) in a
Kafka consumer group, windows them by event time (tumbling, or hopping with
--hop) with a watermark, allowed lateness and late events counted, and
publishes per-engine and per-(cluster, engine) features as Arrow record
batches to ilb.features (and to Arrow IPC files under --out). Records that
do not decode or validate go to ilb.signals.dlq with the reason. Every
--profile-interval (of event time, with --clock event) it fits each
engine's (and each shared SKU's) TTFT and TBOT against load and publishes
the accepted profiles to ilb.profiles.

Offsets are committed with each partition's window checkpoint, so a restart
or another instance of the group resumes without double counting, and it
reads back ilb.features first, so it does not publish a window again that
a crashed predecessor published without committing. Several instances in
one --group split the partitions; the one owning partition 0 fits the
profiles for all, on every partition's windows.

The fleet file is watched (and reloaded on SIGHUP): an engine added gets
its max batch, SKU and replicas in the windows and fits from then on, one
removed leaves the profile fits. A file that fails validation is logged,
counted (ilb_fleetwatch_reloads_total{result="rejected"}) and ignored.

HTTP (--http): GET /healthz, GET /metrics, GET /v1/features (latest window),
GET /v1/profiles (current profiles and the latest fit of each engine).`

func cmdAggregator(ctx context.Context, e *env, args []string) error {
	cfg := aggregator.DefaultConfig()
	fs := newFlags(e, "aggregator", "--kafka ADDRS --fleet FILE [flags]", aggregatorAbout)
	kf := addKafkaFlags(fs)
	fleet := fs.String("fleet", "", "fleet file (YAML): max batch, SKUs, replicas, TTFT SLO; required; watched, and reloaded on SIGHUP")
	httpAddr := fs.String("http", "", "HTTP listen address for /healthz, /metrics, /v1/features, /v1/profiles (default: none)")
	sf := addServiceFlags(fs, "ilb-aggregator")
	fs.StringVar(&cfg.Group, "group", cfg.Group, "Kafka consumer group; instances in one group split the partitions")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "window length")
	fs.DurationVar(&cfg.Hop, "hop", 0, "distance between window starts: 0 for tumbling windows, less than --window (dividing it) for hopping ones")
	fs.DurationVar(&cfg.OutOfOrder, "out-of-order", cfg.OutOfOrder, "how far the watermark trails the newest event time")
	fs.DurationVar(&cfg.AllowedLateness, "lateness", cfg.AllowedLateness, "how long a window stays open after the watermark passes its end")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "a partition silent this long has its watermark moved on by the wall clock")
	fs.StringVar(&cfg.OutDir, "out", "", "directory for Arrow IPC files of features and profiles (default: none)")
	fs.DurationVar(&cfg.ProfileInterval, "profile-interval", cfg.ProfileInterval, "how often profiles are refitted (of event time with --clock event)")
	fs.StringVar(&cfg.Clock, "clock", cfg.Clock, "what times the profile refits: event (every --profile-interval of event time, on the windows up to it, so a replay fits what the live run did) or wall")
	fs.IntVar(&cfg.HistoryWindows, "history", cfg.HistoryWindows, "windows of each engine the profile fits see")
	fs.StringVar(&cfg.SignalsTopic, "signals-topic", cfg.SignalsTopic, "Kafka topic of signal events")
	fs.StringVar(&cfg.DLQTopic, "dlq-topic", cfg.DLQTopic, "Kafka topic of rejected signal records")
	fs.StringVar(&cfg.FeaturesTopic, "features-topic", cfg.FeaturesTopic, "Kafka topic of feature windows")
	fs.StringVar(&cfg.ProfilesTopic, "profiles-topic", cfg.ProfilesTopic, "Kafka topic of fitted profiles")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *fleet == "" {
		return badInput("--fleet FILE is required (engines' max batch, SKUs and replicas)")
	}
	f, err := schemas.LoadFleet(*fleet)
	if err != nil {
		return badInput("--fleet: %v", err)
	}
	cfg.ConfigFromFleet(f)
	if _, err := sf.logger(e); err != nil {
		return err
	}
	if cfg.Kafka, err = kf.config("ilb-aggregator"); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return badInput("%v", err)
	}
	return runAggregator(ctx, e, cfg, sf, *httpAddr, *fleet)
}

// runAggregator runs the aggregator; a non-empty fleetPath is watched and
// its changes applied (SetFleet).
func runAggregator(ctx context.Context, e *env, cfg aggregator.Config, sf *serviceFlags, httpAddr, fleetPath string) error {
	sv, err := sf.start(ctx, e)
	if err != nil {
		return err
	}
	defer sv.close()
	log, tel := sv.log, sv.tel
	a, err := aggregator.New(cfg, aggregator.Deps{Logger: log, Tracer: tel.Tracer, Meter: tel.Meter, Metrics: tel.MetricsHandler()})
	if err != nil {
		return badInput("%v", err)
	}
	var g svcrun.Group
	g.ShutdownTimeout = cfg.PublishTimeout + 5*time.Second // the final publish and commit
	g.Add("aggregator", a.Run)
	if fleetPath != "" {
		apply := func(f *schemas.Fleet) error { return a.SetFleet(f) }
		if err := watchFleet(ctx, &g, fleetPath, log, tel.Meter, apply); err != nil {
			return badInput("--fleet: %v", err)
		}
	}
	where := ""
	if httpAddr != "" {
		srv, err := svcrun.Listen(svcrun.DefaultHTTPConfig(httpAddr), a.Handler())
		if err != nil {
			return fmt.Errorf("--http %s: %w", httpAddr, err)
		}
		g.Add("http", srv.Run)
		where = fmt.Sprintf("; features on http://%s/v1/features", srv.Addr())
	}
	hop := cfg.Hop
	if hop == 0 {
		hop = cfg.Window
	}
	fmt.Fprintf(e.stdout, "ilb aggregator (group %s): %s -> %s, %s; windows of %v every %v%s\n",
		cfg.Group, cfg.SignalsTopic, cfg.FeaturesTopic, cfg.ProfilesTopic, cfg.Window, hop, where)
	return g.Run(ctx)
}
