package backtest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// tuneTrace is the stretch of the Mooncake conversation trace the pid and
// optimizer settings are tuned on: minutes 20-40 of the full trace, which
// lives outside the repository. The acceptance test runs on minutes 0-20
// (testdata) with another seed.
const tuneTrace = "../../../shared/data/mooncake/conversation_trace.jsonl"

func tuneBacktest(t *testing.T, mutate func(*Config)) *Backtest {
	t.Helper()
	return tuneSegment(t, 20*time.Minute, mutate)
}

// tuneSegment is tuneBacktest on minutes from..from+20 of the full trace.
func tuneSegment(t *testing.T, from time.Duration, mutate func(*Config)) *Backtest {
	t.Helper()
	fleetPath := "testdata/fleet-3region.yaml"
	if v := os.Getenv("ILB_TUNE_FLEET"); v != "" {
		fleetPath = v
	}
	f, err := schemas.LoadFleet(fleetPath)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTraceFile(tuneTrace, ReadOptions{})
	if err != nil {
		t.Skipf("tuning needs the full trace: %v", err)
	}
	var keep []Request
	for _, r := range tr.Requests {
		if r.ArrivalNs >= int64(from) && r.ArrivalNs < int64(from+20*time.Minute) {
			r.ArrivalNs -= int64(from)
			keep = append(keep, r)
		}
	}
	tr.Requests = keep
	cfg := DefaultConfig()
	cfg.Fleet, cfg.Seed = f, 2
	mutate(&cfg)
	b, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTunePID is the grid search behind DefaultPIDConfig (README.md). Run
// with ILB_TUNE=1; it needs ../shared/data.
func TestTunePID(t *testing.T) {
	if os.Getenv("ILB_TUNE") == "" {
		t.Skip("set ILB_TUNE=1")
	}
	type row struct {
		cfg PIDConfig
		res *PolicyResult
	}
	var rows []row
	for _, kp := range envFloats("ILB_TUNE_KP", 0.05, 0.1, 0.25, 0.5, 1, 2) {
		for _, ki := range envFloats("ILB_TUNE_KI", 0, 0.02, 0.05, 0.2) {
			for _, alpha := range envFloats("ILB_TUNE_ALPHA", 0.2, 0.5, 1) {
				for _, loc := range envFloats("ILB_TUNE_LOC", 1, 0.3) {
					pc := DefaultPIDConfig()
					pc.Kp, pc.Ki, pc.Alpha, pc.Locality = kp, ki, alpha, loc
					b := tuneBacktest(t, func(c *Config) { c.PID = pc })
					r, err := b.RunPolicy(context.Background(), PolicyPID)
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, row{pc, r})
				}
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].res.TTFTMs.P99 < rows[j].res.TTFTMs.P99 })
	for _, r := range rows {
		fmt.Printf("Kp %.2f Ki %.2f alpha %.1f locality %.1f: ttft p50 %.0f p99 %.0f hit %.3f churn %.4f moved %.3f\n",
			r.cfg.Kp, r.cfg.Ki, r.cfg.Alpha, r.cfg.Locality, r.res.TTFTMs.P50, r.res.TTFTMs.P99, r.res.CacheHitRatio, r.res.WeightChurn, r.res.FollowupMovedRatio)
	}
}

// envFloats returns the comma-separated numbers of env var name, or def.
func envFloats(name string, def ...float64) []float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []float64
	for _, s := range strings.Split(v, ",") {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil {
			out = append(out, f)
		}
	}
	return out
}

// TestTuneBaselines prints the other policies on the tuning stretch.
func TestTuneBaselines(t *testing.T) {
	if os.Getenv("ILB_TUNE") == "" {
		t.Skip("set ILB_TUNE=1")
	}
	b := tuneBacktest(t, func(c *Config) {
		c.Parallel = 2
		if v := envFloats("ILB_TUNE_SPILL"); len(v) > 0 {
			c.Optimizer.SpillFactor = v[0]
		}
		if v := envFloats("ILB_TUNE_CHURN"); len(v) > 0 {
			c.Optimizer.ChurnMs = v[0]
		}
		if v := os.Getenv("ILB_TUNE_POL"); v != "" {
			c.Policies = strings.Split(v, ",")
		}
	})
	res, err := b.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Policies {
		fmt.Printf("%-12s ttft p50 %.0f p99 %.0f hit %.3f churn %.4f moved %.3f shed %d\n",
			r.Policy, r.TTFTMs.P50, r.TTFTMs.P99, r.CacheHitRatio, r.WeightChurn, r.FollowupMovedRatio, r.Shed)
	}
}

// TestTuneOptimizer is the search behind the optimizer policy's spill,
// demand smoothing and publish threshold defaults (README.md). Run with
// ILB_TUNE=1; it needs ../shared/data.
func TestTuneOptimizer(t *testing.T) {
	if os.Getenv("ILB_TUNE") == "" {
		t.Skip("set ILB_TUNE=1")
	}
	for _, spill := range envFloats("ILB_TUNE_SPILL", 1, 1.1, 1.25, 1.5) {
		for _, alpha := range envFloats("ILB_TUNE_ALPHA", 0.2, 0.5) {
			for _, minChange := range envFloats("ILB_TUNE_MINCHANGE", 0.002, 0.02) {
				sa := envFloats("ILB_TUNE_SHAPE", 0.2)[0]
				b := tuneBacktest(t, func(c *Config) {
					c.Optimizer.SpillFactor, c.Optimizer.DemandAlpha, c.Optimizer.MinChange = spill, alpha, minChange
					c.Optimizer.ShapeAlpha = sa
				})
				r, err := b.RunPolicy(context.Background(), PolicyOptimizer)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("spill %.2f alpha %.1f min change %.3f: ttft p50 %.0f p99 %.0f hit %.3f churn %.4f moved %.3f shed %d\n",
					spill, alpha, minChange, r.TTFTMs.P50, r.TTFTMs.P99, r.CacheHitRatio, r.WeightChurn, r.FollowupMovedRatio, r.Shed)
			}
		}
	}
}

// TestTuneSegments runs the acceptance comparison on each 20-minute
// stretch of the trace (testdata), on both fleets, with every arrival
// shifted by each of ILB_TUNE_OFFSETS seconds (default 0,1,2,3,4): the
// shift moves the arrivals against the 1 s status and 5 s control ticks,
// which reshuffles which requests make the p99, so it shows how much the
// figures move from one run to the next (README.md). ILB_TUNE=1.
func TestTuneSegments(t *testing.T) {
	if os.Getenv("ILB_TUNE") == "" {
		t.Skip("set ILB_TUNE=1")
	}
	pols := []string{PolicyRoundRobin, PolicyNearest, PolicyLeastLoaded, PolicyHash, PolicyPID, PolicyOptimizer}
	if v := os.Getenv("ILB_TUNE_POL"); v != "" {
		pols = strings.Split(v, ",")
	}
	for _, fleet := range []string{fleetShort, fleetShortH100} {
		for _, st := range stretches {
			for _, off := range envFloats("ILB_TUNE_OFFSETS", 0, 1, 2, 3, 4) {
				b := shiftedBacktest(t, fleet, st.trace, time.Duration(off*float64(time.Second)), func(c *Config) {
					c.Parallel, c.Policies = 2, pols
				})
				res, err := b.Run(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res.Policies {
					fmt.Printf("%s %s +%.0fs %-12s ttft p50 %6.0f p99 %8.0f e2e p99 %8.0f hit %.3f churn %.4f moved %.3f shed %d\n",
						fleet, st.name, off, r.Policy, r.TTFTMs.P50, r.TTFTMs.P99, r.E2EMs.P99, r.CacheHitRatio, r.WeightChurn, r.FollowupMovedRatio, r.Shed)
				}
			}
		}
	}
}

// shiftedBacktest is stretchBacktest with every arrival delayed by shift.
func shiftedBacktest(t *testing.T, fleet, trace string, shift time.Duration, mutate func(*Config)) *Backtest {
	t.Helper()
	f, err := schemas.LoadFleet(fleet)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTraceFile(trace, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Requests {
		tr.Requests[i].ArrivalNs += int64(shift)
	}
	cfg := DefaultConfig()
	cfg.Fleet = f
	mutate(&cfg)
	b, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
