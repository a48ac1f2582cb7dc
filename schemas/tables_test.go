package schemas

import (
	"math"
	"testing"
)

func TestFeatureValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Feature)
		want   string
	}{
		{"ok", func(*Feature) {}, ""},
		{"pair row ok", func(f *Feature) { f.Cluster = "fe-west" }, ""},
		{"utilization above 1 ok", func(f *Feature) { f.Utilization = 1.3 }, ""},
		{"no engine", func(f *Feature) { f.Engine = "" }, "engine name is empty"},
		{"bad cluster", func(f *Feature) { f.Cluster = "fe west" }, "contains ' '"},
		{"zero start", func(f *Feature) { f.WindowStartUnixNano = 0 }, "must have 0 < start < end"},
		{"empty window", func(f *Feature) { f.WindowEndUnixNano = f.WindowStartUnixNano }, "must have 0 < start < end"},
		{"errors > requests", func(f *Feature) { f.Errors = 121 }, "errors 121 > requests 120"},
		{"negative rps", func(f *Feature) { f.ArrivalRPS = -1 }, "arrival_rps -1"},
		{"NaN percentile", func(f *Feature) { f.TTFTP99Ms = math.NaN() }, "ttft_p99_ms NaN"},
		{"inf utilization", func(f *Feature) { f.Utilization = math.Inf(1) }, "utilization +Inf"},
		{"error rate above 1", func(f *Feature) { f.ErrorRate = 1.5 }, "error_rate 1.5 must be in [0, 1]"},
		{"cache hit negative", func(f *Feature) { f.CacheHitRatio = -0.1 }, "cache_hit_ratio -0.1"},
		{"kv util above 1", func(f *Feature) { f.KVCacheUtil = 2 }, "kv_cache_util 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := sampleFeatures()[0]
			tc.mutate(&f)
			checkErr(t, f.Validate(), tc.want, ErrInvalid)
		})
	}
}

func TestProfileValidate(t *testing.T) {
	good := Profile{Engine: "e", SKU: "h100", FittedAtUnixNano: 1, CapacityRPS: 3, TTFTBaseMs: 150,
		TTFTQueueMs: 40, TBOTBaseMs: 30, TBOTSlopeMs: 15, TTFTR2: 0.9, TBOTR2: 0.8, Samples: 10,
		LoadMinRPS: 0.2, LoadMaxRPS: 2.5}
	cases := []struct {
		name   string
		mutate func(*Profile)
		want   string
	}{
		{"ok", func(*Profile) {}, ""},
		{"sku only ok", func(p *Profile) { p.Engine = "" }, ""},
		{"negative r2 ok", func(p *Profile) { p.TTFTR2 = -3 }, ""},
		{"no engine or sku", func(p *Profile) { p.Engine, p.SKU = "", "" }, "neither engine nor sku"},
		{"no fit time", func(p *Profile) { p.FittedAtUnixNano = 0 }, "fitted_at 0"},
		{"zero capacity", func(p *Profile) { p.CapacityRPS = 0 }, "capacity_rps 0 must be finite and > 0"},
		{"inf capacity", func(p *Profile) { p.CapacityRPS = math.Inf(1) }, "capacity_rps +Inf"},
		{"negative queue", func(p *Profile) { p.TTFTQueueMs = -1 }, "ttft_queue_ms -1"},
		{"r2 above 1", func(p *Profile) { p.TBOTR2 = 1.01 }, "tbot_r2 1.01 must be finite and <= 1"},
		{"r2 NaN", func(p *Profile) { p.TTFTR2 = math.NaN() }, "ttft_r2 NaN"},
		{"no samples", func(p *Profile) { p.Samples = 0 }, "samples must be > 0"},
		{"load range", func(p *Profile) { p.LoadMinRPS = 3 }, "load range [3, 2.5] has min > max"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := good
			tc.mutate(&p)
			checkErr(t, p.Validate(), tc.want, ErrInvalid)
		})
	}
}
