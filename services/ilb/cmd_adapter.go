package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/adapter"
	svcrun "github.com/ilb-router/ilb/services/internal/run"
)

const adapterAbout = `Scrapes real engines' Prometheus metrics (vLLM, or SGLang) every --interval
and publishes ilb signal events to Kafka, so ilb can front a real fleet:
a status event per engine per scrape (running, waiting, KV cache use;
unhealthy when the scrape fails) and completion events synthesized from
what the engine's counters and histograms grew by (flagged with the record
header ilb-synthetic: metrics).

--target NAME=URL names an engine as in the fleet file and its metrics
URL; repeat it or separate targets with commas. NAME=sglang:URL or
NAME=vllm:URL overrides --kind for one target.

--fleet FILE scrapes every engine of the fleet file that has a url, at
URL/metrics (vLLM and SGLang serve /metrics beside /v1); a --target of
the same name overrides its URL. The file is watched, and read again on
SIGHUP: an engine added is scraped from then on, one removed no longer,
one whose URL changed at its new address. A file that fails validation,
or leaves nothing to scrape, is logged and counted
(ilb_fleetwatch_reloads_total{result="rejected"}) and changes nothing.`

func cmdAdapter(ctx context.Context, e *env, args []string) error {
	cfg := adapter.DefaultConfig()
	fs := newFlags(e, "adapter", "--kafka ADDRS (--fleet FILE | --target NAME=URL[,NAME=URL..]) [--interval 5s] [--kind vllm|sglang]", adapterAbout)
	kf := addKafkaFlags(fs)
	var targets []string
	fs.Func("target", "engine to scrape, NAME=URL (repeatable, or comma-separated)", func(s string) error {
		targets = append(targets, s)
		return nil
	})
	kind := fs.String("kind", string(adapter.KindVLLM), "metric names the targets expose: vllm or sglang")
	fleetPath := fs.String("fleet", "", "fleet file (YAML): scrape its engines' URL/metrics, watched for changes")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "scrape period")
	fs.DurationVar(&cfg.ScrapeTimeout, "scrape-timeout", cfg.ScrapeTimeout, "bound on one scrape")
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "Kafka topic of the signal events")
	httpAddr := fs.String("http", "", "serve the adapter's own /metrics and /healthz here (default: off)")
	sf := addServiceFlags(fs, "ilb-adapter")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	at, err := adapterConfig(&cfg, kf, targets, *kind, *fleetPath)
	if err != nil {
		return err
	}
	sv, err := sf.start(ctx, e)
	if err != nil {
		return err
	}
	defer sv.close()
	tel := sv.tel
	cfg.Logger = sv.log
	cfg.MeterProvider, cfg.TracerProvider = tel.Meter, tel.Tracer
	a, err := adapter.New(cfg)
	if err != nil {
		return err
	}
	var g svcrun.Group
	g.Add("adapter", a.Run)
	if *fleetPath != "" {
		apply := func(f *schemas.Fleet) error {
			ts, err := at.fleetTargets(f)
			if err != nil {
				return err
			}
			return a.SetTargets(ts)
		}
		if err := watchFleet(ctx, &g, *fleetPath, sv.log, tel.Meter, apply); err != nil {
			return badInput("--fleet: %v", err)
		}
	}
	if *httpAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", tel.MetricsHandler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		srv, err := svcrun.Listen(svcrun.DefaultHTTPConfig(*httpAddr), mux)
		if err != nil {
			return err
		}
		g.Add("http", srv.Run)
		fmt.Fprintf(e.stdout, "adapter metrics on http://%s/metrics\n", srv.Addr())
	}
	for _, t := range cfg.Targets {
		fmt.Fprintf(e.stdout, "scraping %s (%s) every %v: %s\n", t.Engine, t.Kind, cfg.Interval, t.URL)
	}
	if *fleetPath != "" {
		fmt.Fprintf(e.stdout, "watching %s for engines added and removed\n", *fleetPath)
	}
	return g.Run(ctx)
}

// adapterTargets are the --target flags and --kind, to which a fleet
// file's engines are added.
type adapterTargets struct {
	flags []adapter.Target
	kind  adapter.Kind
}

// fleetTargets are the flags' targets and, for every other engine of f
// with a URL, URL/metrics.
func (at adapterTargets) fleetTargets(f *schemas.Fleet) ([]adapter.Target, error) {
	out := slices.Clone(at.flags)
	for _, e := range f.Engines {
		if e.URL == "" || slices.ContainsFunc(at.flags, func(t adapter.Target) bool { return t.Engine == e.Name }) {
			continue
		}
		out = append(out, adapter.Target{Engine: e.Name, URL: strings.TrimSuffix(e.URL, "/") + "/metrics", Kind: at.kind})
	}
	if len(out) == 0 {
		return nil, errors.New("no engine of the fleet has a url, and no --target")
	}
	return out, nil
}

// adapterConfig maps --target, --kind, --fleet and the Kafka flags to
// cfg.
func adapterConfig(cfg *adapter.Config, kf *kafkaFlags, targets []string, kind, fleetPath string) (adapterTargets, error) {
	k, err := adapter.ParseKind(kind)
	if err != nil {
		return adapterTargets{}, badInput("--kind: %v", err)
	}
	at := adapterTargets{kind: k}
	for _, arg := range targets {
		for _, item := range strings.Split(arg, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			t, err := parseAdapterTarget(item, k)
			if err != nil {
				return at, err
			}
			at.flags = append(at.flags, t)
		}
	}
	cfg.Targets = at.flags
	if fleetPath != "" {
		f, err := schemas.LoadFleet(fleetPath)
		if err != nil {
			return at, badInput("--fleet: %v", err)
		}
		if cfg.Targets, err = at.fleetTargets(f); err != nil {
			return at, badInput("--fleet: %v", err)
		}
	}
	if len(cfg.Targets) == 0 {
		return at, badInput("no --target or --fleet given (--target NAME=http://host:8000/metrics)")
	}
	kc, err := kf.config("ilb-adapter")
	if err != nil {
		return at, err
	}
	cfg.Kafka = kc
	if err := cfg.Validate(); err != nil {
		return at, usageError{err}
	}
	return at, nil
}

// parseAdapterTarget reads NAME=URL or NAME=KIND:URL.
func parseAdapterTarget(s string, kind adapter.Kind) (adapter.Target, error) {
	name, u, ok := strings.Cut(s, "=")
	if !ok || name == "" || u == "" {
		return adapter.Target{}, badInput("--target %q: want NAME=URL", s)
	}
	if pre, rest, ok := strings.Cut(u, ":"); ok && !strings.HasPrefix(rest, "//") {
		k, err := adapter.ParseKind(pre)
		if err != nil {
			return adapter.Target{}, badInput("--target %q: %v", s, err)
		}
		kind, u = k, rest
	}
	return adapter.Target{Engine: name, URL: u, Kind: kind}, nil
}
