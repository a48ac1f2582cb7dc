package schemas

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"unicode"
)

// Validate checks a fleet with defaults applied: globals in range, network
// latencies finite and non-negative, unique valid names, every region
// used by a cluster or engine present in network_ms, positive engine
// numbers, demand shares summing to more than zero, at least one
// eligible engine for every cluster, and the model fields
// (validateModels). Errors name the offending entry.
func (f *Fleet) Validate() error {
	for _, check := range []func() error{f.validateGlobals, f.validateNetwork,
		f.validateClusters, f.validateEngines, f.validateEligibility, f.validateModels} {
		if err := check(); err != nil {
			return fmt.Errorf("schemas: fleet: %w: %w", ErrInvalid, err)
		}
	}
	return nil
}

func (f *Fleet) validateGlobals() error {
	if !(f.MaxUtilization > 0 && f.MaxUtilization < 1) {
		return fmt.Errorf("max_utilization %v must be in (0, 1)", f.MaxUtilization)
	}
	if f.BlockTokens <= 0 {
		return fmt.Errorf("block_tokens %d must be > 0", f.BlockTokens)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"ttft_slo_ms", f.TTFTSLOMs}, {"tbot_slo_ms", f.TBOTSLOMs}, {"mean_output_tokens", f.MeanOutputTokens}} {
		if err := checkPositive(p.name, p.v); err != nil {
			return err
		}
	}
	// shed_penalty_ms 0 is automatic: shed only what the engines cannot
	// take within their caps (solver/optimize).
	if err := checkNonNegative("shed_penalty_ms", f.ShedPenaltyMs); err != nil {
		return err
	}
	return checkNonNegative("total_demand_rps", f.TotalDemandRPS)
}

func checkPositive(field string, v float64) error {
	if !(v > 0) || math.IsInf(v, 1) {
		return fmt.Errorf("%s %v must be finite and > 0", field, v)
	}
	return nil
}

func (f *Fleet) validateNetwork() error {
	if len(f.NetworkMs) == 0 {
		return errors.New("network_ms is empty")
	}
	for _, from := range sortedKeys(f.NetworkMs) {
		if strings.TrimSpace(from) == "" {
			return errors.New("network_ms: empty region name")
		}
		row := f.NetworkMs[from]
		for _, to := range sortedKeys(row) {
			if strings.TrimSpace(to) == "" {
				return fmt.Errorf("network_ms[%s]: empty region name", from)
			}
			if err := checkNonNegative(fmt.Sprintf("network_ms[%s][%s]", from, to), row[to]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *Fleet) validateClusters() error {
	if len(f.Clusters) == 0 {
		return errors.New("no clusters")
	}
	regions, seen, total := f.regionSet(), map[string]bool{}, 0.0
	for i, c := range f.Clusters {
		if err := ValidClusterName(c.Name); err != nil {
			return fmt.Errorf("clusters[%d]: %w", i, err)
		}
		if seen[c.Name] {
			return fmt.Errorf("clusters[%d]: cluster %q listed twice", i, c.Name)
		}
		seen[c.Name] = true
		if err := checkRegion(regions, c.Region); err != nil {
			return fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		if err := checkNonNegative("demand_share", c.DemandShare); err != nil {
			return fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		total += c.DemandShare
	}
	if !(total > 0) || math.IsInf(total, 0) {
		return fmt.Errorf("demand shares sum to %v, want a finite value > 0", total)
	}
	return nil
}

func checkRegion(regions map[string]bool, region string) error {
	if region == "" {
		return errors.New("region is empty")
	}
	if !regions[region] {
		return fmt.Errorf("region %q does not appear in network_ms", region)
	}
	return nil
}

func (f *Fleet) validateEngines() error {
	if len(f.Engines) == 0 {
		return errors.New("no engines")
	}
	regions, seen := f.regionSet(), map[string]bool{}
	for i, e := range f.Engines {
		if err := checkFleetName(e.Name); err != nil {
			return fmt.Errorf("engines[%d]: %w", i, err)
		}
		if seen[e.Name] {
			return fmt.Errorf("engines[%d]: engine %q listed twice", i, e.Name)
		}
		seen[e.Name] = true
		if err := f.validateEngine(regions, e); err != nil {
			return fmt.Errorf("engine %q: %w", e.Name, err)
		}
	}
	return nil
}

// checkFleetName also rejects spaces and control characters: names in a
// hand-written file with a stray space are almost always typos.
func checkFleetName(name string) error {
	if err := checkEngineName(name); err != nil {
		return err
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return fmt.Errorf("name %q contains a space or control character", name)
	}
	return nil
}

func (f *Fleet) validateEngine(regions map[string]bool, e FleetEngine) error {
	if err := checkRegion(regions, e.Region); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(e.SKU) == "":
		return errors.New("sku is empty")
	case e.MaxBatch <= 0:
		return fmt.Errorf("max_batch %d must be > 0", e.MaxBatch)
	case e.KVCacheTokens < f.BlockTokens:
		return fmt.Errorf("kv_cache_tokens %d must hold at least one block (%d tokens)", e.KVCacheTokens, f.BlockTokens)
	case e.Replicas <= 0:
		return fmt.Errorf("replicas %d must be > 0", e.Replicas)
	case e.Scheduler != SchedulerChunked && e.Scheduler != SchedulerWhole:
		return fmt.Errorf("scheduler %q must be %s or %s", e.Scheduler, SchedulerChunked, SchedulerWhole)
	case e.MaxNumBatchedTokens < 0 || e.MaxNumBatchedTokens > 0 && e.MaxNumBatchedTokens < e.MaxBatch:
		return fmt.Errorf("max_num_batched_tokens %d must be 0 (the SKU's default) or at least max_batch %d", e.MaxNumBatchedTokens, e.MaxBatch)
	}
	if err := checkPositive("prefill_tokens_per_s", e.PrefillTokensPerS); err != nil {
		return err
	}
	if err := checkPositive("decode_step_ms.base", e.DecodeStepMs.Base); err != nil {
		return err
	}
	if err := checkNonNegative("decode_step_ms.per_seq", e.DecodeStepMs.PerSeq); err != nil {
		return err
	}
	return checkEngineURL(e.URL)
}

// checkEngineURL accepts an empty URL (filled in by `ilb dev` and
// engine-sim) or an absolute http(s) URL with a host.
func checkEngineURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q must be an absolute http or https URL", raw)
	}
	return nil
}

func (f *Fleet) validateEligibility() error {
	for _, c := range f.Clusters {
		if !slices.ContainsFunc(f.Engines, func(e FleetEngine) bool { return f.Eligible(c, e) }) {
			need := ""
			if c.Residency != "" {
				need = fmt.Sprintf("residency %q and ", c.Residency)
			}
			return fmt.Errorf("cluster %q (region %s) has no eligible engine: none has %sa network_ms entry to or from %s",
				c.Name, c.Region, need, c.Region)
		}
	}
	return nil
}

// regionSet is every region named in network_ms, as source or target.
func (f *Fleet) regionSet() map[string]bool {
	set := make(map[string]bool, len(f.NetworkMs))
	for from, row := range f.NetworkMs {
		set[from] = true
		for to := range row {
			set[to] = true
		}
	}
	return set
}
