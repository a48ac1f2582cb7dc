package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/enginesim"
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
interrupted.`

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
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	select {
	case <-sim.Ready():
		printEngineURLs(e, sim)
	case err := <-done:
		return err
	}
	return <-done
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
