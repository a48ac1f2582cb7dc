package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/ilb-router/ilb/services/backtest"
)

// seedsResult is what `ilb backtest --seeds N --json` writes: every run
// and, by policy, the mean and range over them.
type seedsResult struct {
	Seeds   []uint64           `json:"seeds"`
	Summary []seedsSummary     `json:"summary"`
	Runs    []*backtest.Result `json:"runs"`
}

// seedsSummary is one policy over the runs.
type seedsSummary struct {
	Policy        string `json:"policy"`
	SLOAttainment spread `json:"slo_attainment"`
	Shed          spread `json:"shed"`
	CacheHitRatio spread `json:"cache_hit_ratio"`
	WeightChurn   spread `json:"weight_churn"`
	// WeightMoved is weight_moved_per_minute (backtest.PolicyResult).
	WeightMoved spread `json:"weight_moved_per_minute"`
	// Best is in how many runs the policy's SLO attainment was the
	// highest (ties count for each).
	Best int `json:"best"`
}

// spread is a mean and range over runs.
type spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func (s *spread) add(v float64, i, n int) {
	if i == 0 {
		s.Min, s.Max = v, v
	}
	s.Min, s.Max, s.Mean = min(s.Min, v), max(s.Max, v), s.Mean+v/float64(n)
}

// runSeeds runs the backtest once per seed f.seed .. f.seed+f.seeds−1,
// each from a fresh read of the trace (New maps and jitters it in place),
// and prints each policy's mean and range.
func (f *backtestFlags) runSeeds(ctx context.Context, e *env) error {
	var out seedsResult
	for k := range f.seeds {
		seed := f.seed + uint64(k)
		cfg, tr, err := f.load(e)
		if err != nil {
			return err
		}
		cfg.Seed = seed
		b, err := backtest.New(cfg, tr)
		if err != nil {
			return badInput("%v", err)
		}
		if !f.quiet {
			fmt.Fprintf(e.stderr, "backtest: seed %d (%d of %d)\n", seed, k+1, f.seeds)
		}
		res, err := b.Run(ctx)
		if err != nil {
			return err
		}
		out.Seeds, out.Runs = append(out.Seeds, seed), append(out.Runs, res)
	}
	out.Summary = summarizeSeeds(out.Runs)
	printSeeds(e.stdout, &out)
	if f.jsonOut == "" {
		return nil
	}
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if err := os.WriteFile(f.jsonOut, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// summarizeSeeds is each policy's mean and range over the runs, in the
// runs' policy order.
func summarizeSeeds(runs []*backtest.Result) []seedsSummary {
	if len(runs) == 0 {
		return nil
	}
	out := make([]seedsSummary, len(runs[0].Policies))
	for i, p := range runs[0].Policies {
		out[i].Policy = p.Policy
	}
	for k, res := range runs {
		best := 0.0
		for _, p := range res.Policies {
			best = max(best, p.SLOAttainment)
		}
		for i, p := range res.Policies {
			s := &out[i]
			s.SLOAttainment.add(p.SLOAttainment, k, len(runs))
			s.Shed.add(float64(p.Shed), k, len(runs))
			s.CacheHitRatio.add(p.CacheHitRatio, k, len(runs))
			s.WeightChurn.add(p.WeightChurn, k, len(runs))
			s.WeightMoved.add(p.WeightMovedPerMinute, k, len(runs))
			if p.SLOAttainment == best {
				s.Best++
			}
		}
	}
	return out
}

func printSeeds(w io.Writer, r *seedsResult) {
	if len(r.Runs) == 0 || len(r.Runs[0].Policies) == 0 {
		return
	}
	slo := r.Runs[0].Policies[0].SLO
	fmt.Fprintf(w, "SLO: TTFT <= %g ms and mean TBOT <= %g ms; %d runs (seeds %d-%d, arrivals jittered by up to %g ms): mean, min and max over them\n",
		slo.TTFTMs, slo.TBOTMs, len(r.Runs), r.Seeds[0], r.Seeds[len(r.Seeds)-1], r.Runs[0].Trace.JitterMs)
	rows := slices.Clone(r.Summary)
	slices.SortStableFunc(rows, func(a, b seedsSummary) int {
		switch {
		case a.SLOAttainment.Mean > b.SLOAttainment.Mean:
			return -1
		case a.SLOAttainment.Mean < b.SLOAttainment.Mean:
			return 1
		}
		return 0
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tSLO att.\tmin\tmax\tbest in\tshed\tcache hit\tchurn\tchurn max\t")
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t%d/%d\t%.0f\t%.3f\t%.4f\t%.4f\t\n", s.Policy, s.SLOAttainment.Mean, s.SLOAttainment.Min,
			s.SLOAttainment.Max, s.Best, len(r.Runs), s.Shed.Mean, s.CacheHitRatio.Mean, s.WeightChurn.Mean, s.WeightChurn.Max)
	}
	tw.Flush()
}
