package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest"
	"github.com/ilb-router/ilb/services/internal/routing"
)

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type backtestFlags struct {
	fleet, trace, policy, format, jsonOut, report string
	requests, affinity, spread                    string
	speed                                         float64
	seed                                          uint64
	duration, pendingSync, jitter                 time.Duration
	smooth                                        routing.SmoothConfig
	swings, fails                                 listFlag
	skipBad, quiet                                bool
	parallel, seeds                               int
}

func cmdBacktest(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "backtest", "--fleet FILE --trace FILE [--policy P[,P...]] [flags]",
		"Replays a request trace over a fleet under each routing policy, in virtual time (a discrete-event\n"+
			"simulation of the engine model), and prints a table per policy, led by SLO attainment: the share of\n"+
			"ALL requests served within the fleet's ttft_slo_ms and tbot_slo_ms (shed and failed ones are misses).\n"+
			"Policies: "+strings.Join(backtest.Policies, ", ")+";\n"+
			"a peer policy with the suffix :local (llm-d:local) keeps to its cluster's region while any engine there is healthy.\n"+
			"Trace formats: ilb CSV, Mooncake JSONL, Azure LLM inference CSV, LMBench per-request logs (detected, or --format).")
	var f backtestFlags
	fs.StringVar(&f.fleet, "fleet", "", "fleet file (YAML)")
	fs.StringVar(&f.trace, "trace", "", "request trace file")
	fs.StringVar(&f.policy, "policy", "all", "comma-separated policies, or all")
	fs.StringVar(&f.format, "format", "auto", "trace format: auto, csv, mooncake, azure or lmbench")
	fs.Float64Var(&f.speed, "speed", 1, "divide every gap between arrivals by this")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of every random choice (same seed, same numbers)")
	fs.IntVar(&f.seeds, "seeds", 1, "run seeds --seed .. --seed+N-1 (with --jitter) and print each policy's mean and range over them;\n"+
		"--json then writes every run and the summary")
	fs.StringVar(&f.jsonOut, "json", "", "write the results as JSON to this file")
	fs.StringVar(&f.report, "report", "", "write an HTML report (index.html with charts) into this directory")
	fs.StringVar(&f.requests, "requests", "", "write one row per request and policy to this file: CSV, gzip CSV if it ends in .gz,\n"+
		"Parquet if it ends in .parquet (columns: "+strings.Join(backtest.RequestsHeader, ",")+")")
	fs.StringVar(&f.spread, "spread", "auto", "spread requests that share a timestamp evenly up to the next one: auto (when at least\n"+
		"half of the requests share theirs, as in Mooncake's 3 s stamps), on or off")
	fs.DurationVar(&f.jitter, "jitter", 0, "move each arrival later by a random amount up to this (from --seed), never past the next one;\n"+
		"results move by chance in the small, so run a few seeds with --jitter 1ms to see by how much (0: timestamps as they are)")
	fs.DurationVar(&f.duration, "duration", 0, "replay only the requests arriving before this simulated time (0: all)")
	fs.DurationVar(&f.pendingSync, "pending-sync", backtest.DefaultOptimizerConfig().PendingSync,
		"optimizer: how old the other data planes' pending prefill is when a data plane compares engines by it\n"+
			"(their --pending-sync interval plus delivery between regions); 0 shares nothing")
	fs.DurationVar(&f.smooth.Weights, "smooth-weights", backtest.DefaultOptimizerConfig().Smooth.Weights,
		"optimizer: while a cluster sheds, the time constant of its published split over the engines (ilb optimizer --smooth-weights); 0: as solved")
	fs.DurationVar(&f.smooth.Shed, "smooth-shed", backtest.DefaultOptimizerConfig().Smooth.Shed,
		"optimizer: the same for its shed fraction (ilb optimizer --smooth-shed); 0: as solved")
	fs.DurationVar(&f.smooth.Reuse, "smooth-reuse", backtest.DefaultOptimizerConfig().Smooth.Reuse,
		"optimizer: while a cluster sheds nothing, the time constant of its split when prompts reuse the prefix cache, after an overload has ended too (ilb optimizer --smooth-reuse); 0: as solved")
	fs.DurationVar(&f.smooth.Calm, "smooth-calm", backtest.DefaultOptimizerConfig().Smooth.Calm,
		"optimizer: the same without reuse, and its least with reuse (ilb optimizer --smooth-calm); 0: as solved")
	fs.Var(&f.swings, "swing", "demand swing cluster=NAME,factor=X,from=DUR,to=DUR (repeatable)")
	fs.Var(&f.fails, "fail", "engine failure engine=NAME,at=DUR[,for=DUR] (repeatable)")
	fs.StringVar(&f.affinity, "affinity-key", "conversation", "what requests are routed by: conversation (the trace's ids) or prompt\n"+
		"(the data plane's key for clients that send no id: the conversation's first prompt blocks)")
	fs.BoolVar(&f.skipBad, "skip-bad", false, "skip and count bad trace lines instead of failing")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines on stderr")
	fs.IntVar(&f.parallel, "parallel", runtime.GOMAXPROCS(0), "policies simulated at once (results do not depend on it)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	switch {
	case f.seeds < 1 || f.seeds > 1000:
		return badInput("--seeds %d: want 1 to 1000", f.seeds)
	case f.seeds > 1 && f.jitter <= 0:
		return badInput("--seeds %d needs --jitter (1ms is enough): without it every seed replays the same timestamps and the deterministic policies give the same numbers", f.seeds)
	case f.seeds > 1 && (f.requests != "" || f.report != ""):
		return badInput("--seeds runs several times: --requests and --report take one run (drop --seeds, or pick a --seed)")
	case f.seeds > 1:
		return f.runSeeds(ctx, e)
	}
	cfg, tr, err := f.load(e)
	if err != nil {
		return err
	}
	b, err := backtest.New(cfg, tr)
	if err != nil {
		return badInput("%v", err)
	}
	var reqs *backtest.RequestsFile
	if f.requests != "" {
		if reqs, err = backtest.CreateRequests(f.requests); err != nil {
			return badInput("%v", err)
		}
	}
	sum := b.Summary()
	if !f.quiet {
		fmt.Fprintf(e.stderr, "backtest: %d requests, %d conversations, %.0f s of trace; policies %s\n",
			sum.Requests, sum.Conversations, sum.DurationS, strings.Join(cfg.Policies, ", "))
	}
	res, err := b.Run(ctx)
	if err != nil {
		if reqs != nil {
			reqs.Abort()
		}
		return err
	}
	printTable(e.stdout, res)
	if reqs != nil {
		if err := reqs.Write(b, res); err != nil {
			return err
		}
	}
	return f.write(e, res)
}

// load reads and checks everything the flags name; every problem is a
// usage error (exit status 2).
func (f *backtestFlags) load(e *env) (backtest.Config, *backtest.Trace, error) {
	cfg := backtest.DefaultConfig()
	if f.fleet == "" || f.trace == "" {
		return cfg, nil, badInput("--fleet and --trace are required (see ilb backtest --help)")
	}
	policies, err := backtest.ParsePolicies(f.policy)
	if err != nil {
		return cfg, nil, badInput("--policy: %v", err)
	}
	spread, err := backtest.ParseSpread(f.spread)
	if err != nil {
		return cfg, nil, badInput("%v", err)
	}
	cfg.Spread = spread
	format, err := backtest.ParseFormat(f.format)
	if err != nil {
		return cfg, nil, badInput("--format: %v", err)
	}
	fleet, err := schemas.LoadFleet(f.fleet)
	if err != nil {
		return cfg, nil, badInput("%v", err)
	}
	cfg.Fleet, cfg.Policies, cfg.Seed, cfg.Speed, cfg.Duration, cfg.Parallel = fleet, policies, f.seed, f.speed, f.duration, f.parallel
	cfg.AffinityKey, cfg.Jitter = f.affinity, f.jitter
	if f.jitter < 0 || f.jitter > time.Minute {
		return cfg, nil, badInput("--jitter %v: want a duration from 0 (off) to 1m", f.jitter)
	}
	if f.pendingSync < 0 {
		return cfg, nil, badInput("--pending-sync %v: want a duration >= 0 (0 shares nothing)", f.pendingSync)
	}
	cfg.Optimizer.PendingSync = f.pendingSync
	if err := f.smooth.Validate(); err != nil {
		return cfg, nil, badInput("--smooth-weights, --smooth-shed, --smooth-reuse: %v", err)
	}
	cfg.Optimizer.Smooth = f.smooth
	for _, s := range f.swings {
		sw, err := backtest.ParseSwing(s)
		if err != nil {
			return cfg, nil, badInput("%v", err)
		}
		cfg.Swings = append(cfg.Swings, sw)
	}
	for _, s := range f.fails {
		fl, err := backtest.ParseFailure(s)
		if err != nil {
			return cfg, nil, badInput("%v", err)
		}
		cfg.Failures = append(cfg.Failures, fl)
	}
	if !f.quiet {
		cfg.Progress = e.stderr
	}
	tr, err := readTrace(e, f.trace, format, f.skipBad)
	return cfg, tr, err
}

func readTrace(e *env, path string, format backtest.Format, skipBad bool) (*backtest.Trace, error) {
	tr, err := backtest.ReadTraceFile(path, backtest.ReadOptions{Format: format, SkipBad: skipBad})
	if err != nil {
		return nil, badInput("%v", err)
	}
	if tr.Skipped > 0 {
		fmt.Fprintf(e.stderr, "trace: skipped %d bad lines (first: %v)\n", tr.Skipped, tr.FirstError)
	}
	return tr, nil
}

func (f *backtestFlags) write(e *env, res *backtest.Result) error {
	if f.jsonOut != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		if err := os.WriteFile(f.jsonOut, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("json: %w", err)
		}
	}
	if f.report != "" {
		if err := backtest.WriteReport(f.report, res); err != nil {
			return err
		}
		if !f.quiet {
			fmt.Fprintf(e.stderr, "backtest: report in %s/index.html\n", f.report)
		}
	}
	return nil
}

func printTable(w io.Writer, res *backtest.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	if len(res.Policies) > 0 {
		slo := res.Policies[0].SLO
		fmt.Fprintf(w, "SLO: TTFT <= %g ms and mean TBOT <= %g ms; attainment is over all %d requests (shed and failed are misses)\n",
			slo.TTFTMs, slo.TBOTMs, res.Trace.Requests)
	}
	fmt.Fprintln(tw, "policy\tSLO att.\tgoodput rps\tshed\tfailed\tttft p50\tp90\tp99 ms\ttbot p50\tp99 ms\te2e p99 ms\tcache hit\tmax util\tchurn\tmoved\twall s\t")
	for _, p := range res.Policies {
		fmt.Fprintf(tw, "%s\t%.4f\t%.3f\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.0f\t%.3f\t%.2f\t%.4f\t%.3f\t%.2f\t\n",
			p.Policy, p.SLOAttainment, p.GoodputRPS, p.Shed, p.Failed, p.TTFTMs.P50, p.TTFTMs.P90, p.TTFTMs.P99,
			p.TBOTMs.P50, p.TBOTMs.P99, p.E2EMs.P99, p.CacheHitRatio, p.MaxUtilization, p.WeightChurn, p.FollowupMovedRatio, p.WallS)
	}
	tw.Flush()
}
