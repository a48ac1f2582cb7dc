package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/dataplane/extproc"
	svcrun "github.com/ilb-router/ilb/services/internal/run"
	"github.com/ilb-router/ilb/streams/kv"
)

const dataplaneAbout = `Runs the data plane of one or more front-end clusters: it caches each
cluster's weight snapshot, picks an engine per request, applies the local
guardrails (engine health, outlier ejection, bounded-load spill, shedding,
retry budget) and proxies OpenAI-compatible requests (chat completions,
completions, embeddings).

Weights come from exactly one of:
  --snapshot FILE   a JSON snapshot (the KV value format), reloaded when the
                    file changes; an edit must raise "version" to apply
  --nats URL        the optimizer's snapshots in the JetStream KV bucket

Engine status events are read from Kafka when --kafka is given (and by
default with --nats, from 127.0.0.1:9092; --no-kafka turns it off).
Engine URLs come from --fleet (the engines' url fields) and --engine
NAME=URL; without any, the data plane only answers /v1/pick.

Affinity: the X-Conversation-Id header, else the body's user field, else
(unless --prompt-affinity=false) a key derived from the chat's model,
system prompt and first user message, so every turn of a conversation
from an unmodified OpenAI client reaches the same engine.

HTTP: GET /healthz, GET /v1/routing[?cluster=NAME], POST /v1/pick,
POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings,
GET /v1/models, GET /metrics.

Gateways: --ext-proc ADDR also serves the Gateway API Inference Extension
endpoint picker protocol (Envoy ext_proc over gRPC, with gRPC health) on
ADDR, for Envoy-based gateways that forward requests themselves.`

// namesFlag is a repeatable flag whose values may also be comma-separated.
type namesFlag []string

func (l *namesFlag) String() string { return strings.Join(*l, ",") }

func (l *namesFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// dataplaneFlags are the flags of ilb dataplane that need more than a
// field assignment.
type dataplaneFlags struct {
	clusters, engines namesFlag
	snapshot, fleet   string
	httpAddr, extProc string
	noKafka           bool
	svc               *serviceFlags
	kafka             *kafkaFlags
	nats              *natsFlags
	set               map[string]bool // flags given on the command line
}

func cmdDataplane(ctx context.Context, e *env, args []string) error {
	cfg, f, err := parseDataplane(e, args)
	if err != nil {
		return err
	}
	return runDataplane(ctx, e, cfg, f)
}

// parseDataplane maps the command line of ilb dataplane to a checked
// Config and the flags that need more than a field assignment.
func parseDataplane(e *env, args []string) (dataplane.Config, *dataplaneFlags, error) {
	cfg := dataplane.DefaultConfig()
	fs := newFlags(e, "dataplane", "--cluster NAME (--snapshot FILE | --nats URL) [flags]", dataplaneAbout)
	f := &dataplaneFlags{kafka: addKafkaFlags(fs), nats: addNATSFlags(fs)}
	fs.Var(&f.clusters, "cluster", "front-end cluster to serve (repeatable, or comma-separated)")
	fs.StringVar(&f.snapshot, "snapshot", "", "JSON snapshot file for static weights, reloaded on change")
	fs.StringVar(&f.fleet, "fleet", "", "fleet file (YAML): engine URLs and capacities; watched, and reloaded on SIGHUP")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "how long an engine removed from the fleet file keeps its ongoing conversations")
	fs.Var(&f.engines, "engine", "engine base URL as NAME=URL (repeatable); overrides the fleet file")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&f.extProc, "ext-proc", "", "also serve the endpoint picker protocol (Envoy ext_proc, gRPC) on this address, e.g. :9002")
	fs.BoolVar(&f.noKafka, "no-kafka", false, "read no engine status from Kafka")
	f.svc = addServiceFlags(fs, "ilb-dataplane")
	fs.StringVar(&cfg.Bucket, "bucket", cfg.Bucket, "JetStream KV bucket of the weight snapshots")
	fs.StringVar(&cfg.SignalsTopic, "signals-topic", cfg.SignalsTopic, "Kafka topic of engine status events")
	fs.DurationVar(&cfg.StaleAfter, "stale-after", cfg.StaleAfter, "snapshot age past which the stale policy applies")
	fs.Float64Var(&cfg.SpillFactor, "spill-factor", cfg.SpillFactor, "bounded-load factor 1+ε for new conversations")
	fs.DurationVar(&cfg.PendingSync, "pending-sync", cfg.PendingSync,
		"how often to share this process's pending prefill with the other data planes over NATS (subject "+schemas.SubjectPending+"), so that each compares engines by everyone's; 0 turns it off")
	fs.StringVar(&cfg.ShedOrder, "shed-order", cfg.ShedOrder,
		"which new conversations a shed fraction refuses first: largest (the longest prompts of the cluster's recent ones: most engine time freed a refusal) or key (by affinity-key hash, every length alike)")
	fs.DurationVar(&cfg.ProbeInterval, "probe-interval", 0, "period of active health probes (GET URL/health); 0 turns them off")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "largest request body accepted")
	fs.Int64Var(&cfg.RetryBodyBytes, "retry-body-bytes", cfg.RetryBodyBytes,
		"largest body of a header-routed chat request kept so a failed attempt can be retried; larger ones are streamed (0: stream all)")
	fs.StringVar(&cfg.DefaultCluster, "default-cluster", "", "cluster of requests that name none when several are served (clients that send no X-Ilb-Cluster)")
	fs.BoolVar(&cfg.PromptAffinity, "prompt-affinity", cfg.PromptAffinity,
		"derive a chat's affinity key from its model, system prompt and first user message when it has no X-Conversation-Id or user")
	fs.StringVar(&cfg.DefaultModel, "default-model", cfg.DefaultModel, "the model of requests that name none, and the one model GET /v1/models lists when no engine lists models (default: the fleet's default_model)")
	if err := parseFlags(fs, e, args); err != nil {
		return cfg, nil, err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if err := f.apply(&cfg); err != nil {
		return cfg, nil, err
	}
	if _, err := f.svc.logger(e); err != nil {
		return cfg, nil, err
	}
	return cfg, f, nil
}

// apply maps the flags to cfg and checks them, with messages that say
// what to do.
func (f *dataplaneFlags) apply(cfg *dataplane.Config) error {
	if len(f.clusters) == 0 {
		return badInput("--cluster NAME is required (the front-end cluster whose snapshot to serve)")
	}
	cfg.Clusters = f.clusters
	switch {
	case f.snapshot == "" && !f.set["nats"]:
		return badInput("give --snapshot FILE for static weights from a file, or --nats URL to follow the optimizer's snapshots")
	case f.snapshot != "" && f.set["nats"]:
		return badInput("--snapshot and --nats are exclusive: weights come from a file or from NATS, not both")
	}
	cfg.SnapshotFile = f.snapshot
	if cfg.RetryBodyBytes < 0 {
		return badInput("--retry-body-bytes %d: want a size in bytes, or 0 to stream every header-routed body (no retry once sent)", cfg.RetryBodyBytes)
	}
	if err := f.engineURLs(cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return badInput("%v", err)
	}
	return nil
}

// engineURLs fills engine URLs and capacities from --fleet, then --engine.
func (f *dataplaneFlags) engineURLs(cfg *dataplane.Config) error {
	cfg.EngineURLs, cfg.EngineCapacity = map[string]string{}, map[string]int{}
	if f.fleet != "" {
		fl, err := schemas.LoadFleet(f.fleet)
		if err != nil {
			return badInput("--fleet: %v", err)
		}
		if err := f.fleetEngines(fl, cfg.EngineURLs, cfg.EngineCapacity); err != nil {
			return badInput("%v", err)
		}
		fleetModels(cfg, fl, f.set["default-model"])
	}
	return f.engineFlags(cfg.EngineURLs)
}

// fleetEngines adds the fleet's engine URLs and capacities; the fleet
// must still have every --cluster.
func (f *dataplaneFlags) fleetEngines(fl *schemas.Fleet, urls map[string]string, capacity map[string]int) error {
	for _, name := range f.clusters {
		if _, ok := fl.Cluster(name); !ok {
			return fmt.Errorf("--cluster %q is not a cluster of the fleet file %s", name, f.fleet)
		}
	}
	for _, en := range fl.Engines {
		if en.URL != "" {
			urls[en.Name] = en.URL
		}
		capacity[en.Name] = en.MaxBatch * max(1, en.Replicas)
	}
	return nil
}

// engineFlags adds the --engine NAME=URL overrides.
func (f *dataplaneFlags) engineFlags(urls map[string]string) error {
	for _, spec := range f.engines {
		name, url, ok := strings.Cut(spec, "=")
		if !ok || name == "" || url == "" {
			return badInput("--engine %q: want NAME=URL, e.g. --engine eng-a=http://10.0.0.5:8000", spec)
		}
		urls[name] = url
	}
	return nil
}

// applyFleet is the fleet watch's applier: the new fleet's engine URLs
// (with the --engine overrides) and model lists go to the data plane.
func (f *dataplaneFlags) applyFleet(d *dataplane.DataPlane) func(*schemas.Fleet) error {
	return func(fl *schemas.Fleet) error {
		urls, capacity := map[string]string{}, map[string]int{}
		if err := f.fleetEngines(fl, urls, capacity); err != nil {
			return err
		}
		if err := f.engineFlags(urls); err != nil {
			return err
		}
		d.UpdateEngines(urls, capacity)
		var models dataplane.Config
		fleetModels(&models, fl, f.set["default-model"])
		d.UpdateFleetModels(models.EngineModels, models.EngineMaxContext, models.DefaultModel)
		return nil
	}
}

func runDataplane(ctx context.Context, e *env, cfg dataplane.Config, f *dataplaneFlags) error {
	sv, err := f.svc.start(ctx, e)
	if err != nil {
		return err
	}
	defer sv.close()
	log, tel := sv.log, sv.tel
	deps := dataplane.Deps{Logger: log, Tracer: tel.Tracer, Meter: tel.Meter, Metrics: tel.MetricsHandler()}
	if f.set["kafka"] || (f.set["nats"] && !f.noKafka) {
		kc, err := f.kafka.config("ilb-dataplane")
		if err != nil {
			return err
		}
		deps.Kafka = &kc
	}
	if f.set["nats"] {
		nc, err := f.nats.config("ilb-dataplane")
		if err != nil {
			return err
		}
		nc.RetryOnFailedConnect = true // serve (503 until a snapshot) while NATS comes up
		nc.Logger = log                // connection events: disconnects, refused credentials
		conn, js, err := kv.Connect(ctx, nc)
		if err != nil {
			return err
		}
		defer conn.Close()
		deps.JetStream, deps.NATS = js, conn
	}
	d, err := dataplane.New(cfg, deps) // cfg was validated by apply
	if err != nil {
		return err
	}
	if cfg.SnapshotFile != "" {
		if err := d.LoadSnapshotFile(); err != nil {
			return badInput("--snapshot %s: %v", cfg.SnapshotFile, err)
		}
	}
	srv, err := svcrun.Listen(svcrun.DefaultHTTPConfig(f.httpAddr), d.Handler())
	if err != nil {
		return err
	}
	source := "file " + cfg.SnapshotFile
	if cfg.SnapshotFile == "" {
		source = "NATS bucket " + cfg.Bucket
	}
	fmt.Fprintf(e.stdout, "ilb dataplane: serving %s on http://%s (weights from %s)\n",
		strings.Join(cfg.Clusters, ", "), srv.Addr(), source)
	var g svcrun.Group
	g.Add("dataplane", d.Run)
	g.Add("http", srv.Run)
	if f.extProc != "" {
		if err := addExtProc(&g, e, d, cfg, f.extProc, sv); err != nil {
			return err
		}
	}
	if f.fleet != "" {
		if err := watchFleet(ctx, &g, f.fleet, log, tel.Meter, f.applyFleet(d)); err != nil {
			return badInput("--fleet: %v", err)
		}
	}
	return g.Run(ctx)
}

// addExtProc adds the endpoint picker server on addr to g.
func addExtProc(g *svcrun.Group, e *env, d *dataplane.DataPlane, cfg dataplane.Config, addr string, sv *service) error {
	xc := extproc.DefaultConfig()
	xc.Addr, xc.MaxBodyBytes, xc.Fallbacks, xc.PromptAffinity = addr, int(cfg.MaxBodyBytes), cfg.MaxRetries, cfg.PromptAffinity
	x, err := extproc.New(xc, extproc.Deps{Plane: d, Logger: sv.log, Meter: sv.tel.Meter})
	if err != nil {
		return badInput("--ext-proc: %v", err)
	}
	g.Add("ext-proc", func(ctx context.Context) error {
		return x.Run(ctx, func(bound string) {
			fmt.Fprintf(e.stdout, "ilb dataplane: endpoint picker (ext_proc) on grpc://%s\n", bound)
		})
	})
	return nil
}

// fleetModels gives the data plane the engines' models (every engine's,
// schemas.Fleet.EngineModels, in a fleet whose engines list models) and
// context limits, for routing by model and GET /v1/models, and, unless
// --default-model was given, the fleet's default_model.
func fleetModels(cfg *dataplane.Config, fl *schemas.Fleet, keepDefault bool) {
	cfg.EngineModels, cfg.EngineMaxContext = map[string][]string{}, map[string]int{}
	explicit := fl.ExplicitModels()
	for _, en := range fl.Engines {
		if explicit {
			cfg.EngineModels[en.Name] = fl.EngineModels(en)
		}
		if en.MaxContextTokens > 0 {
			cfg.EngineMaxContext[en.Name] = en.MaxContextTokens
		}
	}
	if fl.DefaultModel != "" && !keepDefault {
		cfg.DefaultModel = fl.DefaultModel
	}
}
