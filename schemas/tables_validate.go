package schemas

import (
	"errors"
	"fmt"
	"math"
)

// Validate checks a feature row: an engine, a window with end after
// start, errors not above requests, rates, latencies and utilisation
// finite and non-negative (percentiles are 0 when there were no
// requests), ratios in [0, 1], and a valid cluster name when set.
func (r *Feature) Validate() error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("schemas: feature: %w: %w", ErrInvalid, err)
	}
	return nil
}

func (r *Feature) validate() error {
	if err := checkEngineName(r.Engine); err != nil {
		return err
	}
	if r.Cluster != "" {
		if err := ValidClusterName(r.Cluster); err != nil {
			return err
		}
	}
	if r.WindowStartUnixNano <= 0 || r.WindowEndUnixNano <= r.WindowStartUnixNano {
		return fmt.Errorf("engine %q: window [%d, %d) must have 0 < start < end",
			r.Engine, r.WindowStartUnixNano, r.WindowEndUnixNano)
	}
	if r.Errors > r.Requests {
		return fmt.Errorf("engine %q: errors %d > requests %d", r.Engine, r.Errors, r.Requests)
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"arrival_rps", r.ArrivalRPS}, {"in_flight", r.InFlight}, {"utilization", r.Utilization},
		{"ttft_p50_ms", r.TTFTP50Ms}, {"ttft_p90_ms", r.TTFTP90Ms}, {"ttft_p99_ms", r.TTFTP99Ms},
		{"tbot_p50_ms", r.TBOTP50Ms}, {"tbot_p90_ms", r.TBOTP90Ms}, {"tbot_p99_ms", r.TBOTP99Ms},
		{"prompt_tokens_mean", r.PromptTokensMean}, {"output_tokens_mean", r.OutputTokensMean}, {"uncached_sq_mean", r.UncachedSqMean}} {
		if err := checkNonNegative(v.name, v.v); err != nil {
			return fmt.Errorf("engine %q: %w", r.Engine, err)
		}
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"error_rate", r.ErrorRate}, {"cache_hit_ratio", r.CacheHitRatio}, {"kv_cache_util", r.KVCacheUtil}} {
		if err := checkFraction(v.name, v.v); err != nil {
			return fmt.Errorf("engine %q: %w", r.Engine, err)
		}
	}
	return nil
}

// Validate checks a profile row: an engine or a SKU, a fit time, a
// positive finite capacity, non-negative finite latency coefficients,
// R² values that are finite and at most 1, at least one sample, and a
// load range with 0 <= min <= max.
func (p *Profile) Validate() error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("schemas: profile: %w: %w", ErrInvalid, err)
	}
	return nil
}

func (p *Profile) validate() error {
	if p.Engine == "" && p.SKU == "" {
		return errors.New("neither engine nor sku is set")
	}
	if p.FittedAtUnixNano <= 0 {
		return fmt.Errorf("fitted_at %d must be > 0", p.FittedAtUnixNano)
	}
	if err := checkPositive("capacity_rps", p.CapacityRPS); err != nil {
		return err
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"ttft_base_ms", p.TTFTBaseMs}, {"ttft_queue_ms", p.TTFTQueueMs}, {"tbot_base_ms", p.TBOTBaseMs},
		{"tbot_slope_ms", p.TBOTSlopeMs}, {"load_min_rps", p.LoadMinRPS}, {"load_max_rps", p.LoadMaxRPS},
		{"slo_capacity_rps", p.SLOCapacityRPS}} {
		if err := checkNonNegative(v.name, v.v); err != nil {
			return err
		}
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"ttft_r2", p.TTFTR2}, {"tbot_r2", p.TBOTR2}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v > 1 {
			return fmt.Errorf("%s %v must be finite and <= 1", v.name, v.v)
		}
	}
	if p.Samples == 0 {
		return errors.New("samples must be > 0")
	}
	if p.SLOCapacityRPS > p.CapacityRPS {
		return fmt.Errorf("slo_capacity_rps %v exceeds capacity_rps %v", p.SLOCapacityRPS, p.CapacityRPS)
	}
	if p.LoadMinRPS > p.LoadMaxRPS {
		return fmt.Errorf("load range [%v, %v] has min > max", p.LoadMinRPS, p.LoadMaxRPS)
	}
	return nil
}
