package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/traffic"
)

const devAbout = `Runs a whole local fleet in this one process, with no outside services:
an embedded Kafka-protocol broker and NATS JetStream server (real TCP ports,
so kcat and the nats CLI work), simulated engines in several regions, the
aggregator, the optimizer, a data plane serving every front-end cluster, a
traffic generator playing multi-turn conversations with a demand swing, and
a live page at http://--http/ showing weights, load, TTFT, cache hits,
snapshot versions and shed traffic.

The data plane's API is on the same address: /v1/chat/completions,
/v1/pick, /v1/routing, /healthz, /metrics; so are the aggregator's
/v1/features and /v1/profiles, the optimizer's /v1/optimizer, and the
simulated engines' /engines (POST /engines/NAME/fault injects a fault).

Live fleet changes: the --fleet file is watched (and read again on
SIGHUP); an engine added to it is simulated and routed to from the next
snapshot, one removed drains (no new conversations, weight 0 in the next
snapshot, its ongoing conversations for --drain-timeout, then it stops).
POST /v1/dev/engines/NAME/add and /remove do the same without the file
(GET /v1/dev/fleet lists the engines): add puts back an engine of the
starting fleet, or simulates a new one, like=ENGINE copying another
engine's entry, or described by a JSON fleet engine in the body.

Without --fleet the built-in example fleet runs (ilb dev --print-fleet shows
it). The default demand swing triples the busiest cluster's demand from 60 s
to 180 s of every 5 minutes; --swing=false turns it off and --swing-schedule
sets another (CLUSTER*FACTOR@FROM-TO[/EVERY], comma-separated). Ctrl-C stops
everything cleanly.

--nats-cluster 3 runs NATS as three clustered nodes (client ports from
--nats-listen's upwards) and the weights bucket with three replicas
(--nats-replicas). --duration D is a soak: the fleet runs unattended for D,
then stops and prints failed picks, shed requests, the snapshot age's p50
and p99 at the data plane, the engines' mean utilization, and the heap and
goroutines at start and end with their slope after the warm-up; it exits 1
if any request failed.`

// devFlags are `ilb dev`'s settings.
type devFlags struct {
	fleetPath    string
	httpAddr     string
	kafkaListen  string
	natsListen   string
	rateRPS      float64
	seed         uint64
	swing        bool
	swingSpec    string
	timeScale    float64
	readyFile    string
	progress     time.Duration
	logLevel     string
	printFleet   bool
	shutdownWait time.Duration
	window       time.Duration
	profileEvery time.Duration
	tickWait     time.Duration
	natsCluster  int
	natsReplicas int
	duration     time.Duration
	heapProfile  string
	drainTimeout time.Duration
}

func cmdDev(ctx context.Context, e *env, args []string) error {
	var f devFlags
	fs := newFlags(e, "dev", "[--fleet FILE] [--http ADDR] [--kafka-listen ADDR] [--nats-listen ADDR] [flags]", devAbout)
	fs.StringVar(&f.fleetPath, "fleet", "", "fleet file (YAML); default: the built-in example fleet")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "listen address of the page and the data plane API")
	fs.StringVar(&f.kafkaListen, "kafka-listen", "127.0.0.1:9092", "listen address of the embedded Kafka-protocol broker")
	fs.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:4222", "listen address of the embedded NATS server")
	fs.Float64Var(&f.rateRPS, "rate", 0, "mean request rate of the traffic generator, all clusters (default: the fleet's total_demand_rps, else 12)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the traffic and the simulated engines")
	fs.BoolVar(&f.swing, "swing", true, "swing the demand so rerouting is visible (--swing=false: steady demand)")
	fs.StringVar(&f.swingSpec, "swing-schedule", "", "demand swings CLUSTER*FACTOR@FROM-TO[/EVERY], e.g. fe-east*3@60s-180s/5m (default: the busiest cluster ×3 from 60s to 180s every 5m)")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "run the simulated engines this many times faster than real time (the optimizer's capacity priors assume 1 until profiles are fitted)")
	fs.StringVar(&f.readyFile, "ready-file", "", "write the bound addresses as JSON to this file once everything is up")
	fs.DurationVar(&f.progress, "progress", 10*time.Second, "period of the one-line progress summary on stderr (0: none)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of the services: debug, info, warn or error (to stderr)")
	fs.BoolVar(&f.printFleet, "print-fleet", false, "print the built-in example fleet file and exit")
	fs.DurationVar(&f.shutdownWait, "shutdown-timeout", 10*time.Second, "longest wait for the services to stop on Ctrl-C")
	fs.DurationVar(&f.window, "window", 10*time.Second, "the aggregator's feature window (the optimizer solves once per window): shorter reacts sooner on noisier features")
	fs.DurationVar(&f.profileEvery, "profile-interval", 30*time.Second, "how often (event time) the aggregator refits the latency profiles")
	fs.DurationVar(&f.tickWait, "tick-wait", 2*time.Second, "the optimizer's longest wait for the rest of a window's rows (see ilb optimizer --help)")
	fs.IntVar(&f.natsCluster, "nats-cluster", 0, "run NATS as this many clustered nodes (0: one server)")
	fs.IntVar(&f.natsReplicas, "nats-replicas", 0, "replicas of the weights bucket (default: 3 with --nats-cluster 3 or more, else the node count)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 2*time.Minute, "how long an engine removed from the fleet keeps its ongoing conversations (the data plane) and keeps serving (the simulator)")
	fs.DurationVar(&f.duration, "duration", 0, "soak: run this long, then stop and print a summary (0: until Ctrl-C)")
	fs.StringVar(&f.heapProfile, "heap-profile", "", "soak: write heap profiles PREFIX-warm.pb.gz (after the warm-up) and PREFIX-end.pb.gz (compare with go tool pprof -base)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if f.printFleet {
		_, err := e.stdout.Write(schemas.ExampleFleetYAML())
		return err
	}
	plan, err := f.plan()
	if err != nil {
		return err
	}
	return runDev(ctx, e, plan)
}

// devPlan is everything runDev needs, checked.
type devPlan struct {
	devFlags
	fleet  *schemas.Fleet
	swings []traffic.Swing
	level  slog.Level
}

func (f devFlags) plan() (devPlan, error) {
	p := devPlan{devFlags: f, fleet: schemas.ExampleFleet()}
	if f.fleetPath != "" {
		fl, err := schemas.LoadFleet(f.fleetPath)
		if err != nil {
			return p, badInput("--fleet: %v", err)
		}
		p.fleet = fl
	}
	if err := p.level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return p, badInput("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	if p.rateRPS == 0 {
		p.rateRPS = p.fleet.TotalDemandRPS
		if p.rateRPS == 0 {
			p.rateRPS = 12
		}
	}
	if !(p.rateRPS > 0) {
		return p, badInput("--rate %v: want a positive request rate", f.rateRPS)
	}
	if f.httpAddr == "" || f.kafkaListen == "" || f.natsListen == "" {
		return p, badInput("--http, --kafka-listen and --nats-listen must not be empty")
	}
	if f.progress < 0 || f.shutdownWait <= 0 || f.duration < 0 || f.drainTimeout < 0 {
		return p, badInput("--progress, --duration and --drain-timeout must be >= 0 and --shutdown-timeout positive")
	}
	if err := p.setReplicas(); err != nil {
		return p, err
	}
	return p, p.setSwings()
}

// setReplicas checks --nats-cluster and --nats-replicas and works out the
// bucket's replicas: as many as asked, at most one per node.
func (p *devPlan) setReplicas() error {
	nodes := max(p.natsCluster, 1)
	switch {
	case p.natsCluster < 0 || p.natsCluster == 1:
		return badInput("--nats-cluster %d: want 0 (one server) or 2 or more nodes", p.natsCluster)
	case p.natsReplicas < 0 || p.natsReplicas > min(nodes, 5):
		return badInput("--nats-replicas %d: want 1 to %d (one per node, at most 5)", p.natsReplicas, min(nodes, 5))
	case p.natsReplicas == 0:
		p.natsReplicas = min(nodes, 3)
	}
	return nil
}

func (p *devPlan) setSwings() error {
	switch {
	case !p.swing:
		return nil
	case p.swingSpec != "":
		s, err := traffic.ParseSwings(p.swingSpec)
		if err != nil {
			return badInput("--swing-schedule: %v", err)
		}
		p.swings = s
	default:
		s, err := traffic.DefaultSwing(traffic.ClustersOf(p.fleet))
		if err != nil {
			return badInput("%v", err)
		}
		p.swings = []traffic.Swing{s}
	}
	for _, s := range p.swings {
		if _, ok := p.fleet.Cluster(s.Cluster); !ok {
			return badInput("--swing-schedule: cluster %q is not in the fleet", s.Cluster)
		}
	}
	return nil
}

// listenError turns "address already in use" into advice on which flag
// to change.
func listenError(err error, flagName, addr string) error {
	if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use") {
		return badInput("%s is in use (another ilb dev or ilb brokers?); choose another port with %s, e.g. %s 127.0.0.1:0", addr, flagName, flagName)
	}
	return fmt.Errorf("%s %s: %w", flagName, addr, err)
}

// readyInfo is what --ready-file holds.
type readyInfo struct {
	HTTP    string `json:"http"`
	Page    string `json:"page"`
	Kafka   string `json:"kafka"`
	NATS    string `json:"nats"`
	Engines string `json:"engines"`
}

func writeReadyFile(path string, info readyInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	return nil
}
