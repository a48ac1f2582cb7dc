package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/enginesim"
	svcrun "github.com/ilb-router/ilb/services/internal/run"
)

const engineSimAbout = `Runs simulated LLM engines from a fleet file (the built-in example fleet
without --fleet), all behind one HTTP listener: engine NAME serves
OpenAI-compatible chat completions at http://ADDR/engines/NAME/v1/chat/completions
(stream: true gives server-sent events), timed by ilb's engine model
(continuous batching, KV prefix cache, batch-dependent decode steps). Each
engine publishes a status event every --status-interval and a completion
event per request to the Kafka topic --topic, keyed by engine name.

Also served: GET /engines (state of every engine), GET /engines/NAME/health,
POST /engines/NAME/fault with {"slowdown": 2, "error_rate": 0.5,
"healthy": false, "ready_replicas": 0, "duration": "30s", "reset": true}
(all optional), GET /metrics. Prints each engine's base URL, then runs until
interrupted.

The --fleet file is watched, and read again on SIGHUP: an engine added
starts serving, one whose entry changed takes its new parameters, one
removed keeps serving for --drain-timeout (so that conversations a data
plane still routes to it finish), then stops once idle and answers 404.
A file that fails validation is logged and counted
(ilb_fleetwatch_reloads_total{result="rejected"}), and the engines stay
as they are.`

func cmdEngineSim(ctx context.Context, e *env, args []string) error {
	cfg := enginesim.DefaultConfig()
	fs := newFlags(e, "engine-sim", "[--fleet FILE] [--kafka ADDRS] [--http ADDR] [flags]", engineSimAbout)
	kf := addKafkaFlags(fs)
	fleet := fs.String("fleet", "", "fleet file (YAML); default: the built-in example fleet")
	engines := fs.String("engines", "", "comma-separated engines of the fleet to simulate (default: all)")
	noKafka := fs.Bool("no-kafka", false, "publish no signals (serve HTTP only)")
	sf := addServiceFlags(fs, "ilb-engine-sim")
	fs.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "listen address of the engines' HTTP API")
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "Kafka topic of the signal events")
	fs.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "period of each engine's status event")
	fs.Float64Var(&cfg.TimeScale, "time-scale", cfg.TimeScale, "run the engines this many times faster than real time")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the injected errors")
	fs.IntVar(&cfg.DefaultOutputTokens, "default-output-tokens", cfg.DefaultOutputTokens, "output tokens of a request without max_tokens")
	fs.IntVar(&cfg.MaxOutputTokens, "max-output-tokens", cfg.MaxOutputTokens, "cap on max_tokens")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout,
		"how long an engine removed from the --fleet file keeps serving before it stops once idle")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if err := engineSimConfig(&cfg, kf, *fleet, *engines, *noKafka); err != nil {
		return err
	}
	sv, err := sf.start(ctx, e)
	if err != nil {
		return err
	}
	defer sv.close()
	tel := sv.tel
	cfg.Logger = sv.log
	cfg.MeterProvider, cfg.TracerProvider, cfg.MetricsHandler = tel.Meter, tel.Tracer, tel.MetricsHandler()
	sim, err := enginesim.New(cfg)
	if err != nil {
		return err
	}
	var g svcrun.Group
	g.Add("engine-sim", sim.Run)
	if *fleet != "" {
		if err := watchFleet(ctx, &g, *fleet, sv.log, tel.Meter, sim.SetFleet); err != nil {
			return badInput("--fleet: %v", err)
		}
	}
	g.Add("banner", func(ctx context.Context) error {
		select {
		case <-sim.Ready():
			printEngineURLs(e, sim)
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	})
	return g.Run(ctx)
}

// engineSimConfig maps the non-trivial flags to cfg and validates it.
func engineSimConfig(cfg *enginesim.Config, kf *kafkaFlags, fleetPath, engines string, noKafka bool) error {
	if fleetPath != "" {
		f, err := schemas.LoadFleet(fleetPath)
		if err != nil {
			return badInput("--fleet: %v", err)
		}
		cfg.Fleet = f
	}
	for _, name := range strings.Split(engines, ",") {
		if name = strings.TrimSpace(name); name != "" {
			cfg.Engines = append(cfg.Engines, name)
		}
	}
	cfg.Kafka.Brokers = nil
	if !noKafka {
		kc, err := kf.config("ilb-engine-sim")
		if err != nil {
			return err
		}
		cfg.Kafka = kc
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	return nil
}

func printEngineURLs(e *env, sim *enginesim.Sim) {
	fmt.Fprintf(e.stdout, "engine-sim listening on http://%s (GET /engines lists them)\n", sim.Addr())
	for _, name := range sim.EngineNames() {
		fmt.Fprintf(e.stdout, "  %s\t%s\n", name, sim.BaseURL(name))
	}
}
