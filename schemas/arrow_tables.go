package schemas

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// featureColumns is the feature table, column by column (README.md lists
// them with units). Adding a column at the end keeps features/v1;
// renaming, removing or retyping one means features/v2.
var featureColumns = []column[Feature]{
	timeCol("window_start", func(r *Feature) *int64 { return &r.WindowStartUnixNano }),
	timeCol("window_end", func(r *Feature) *int64 { return &r.WindowEndUnixNano }),
	strCol("engine", false, func(r *Feature) *string { return &r.Engine }),
	strCol("cluster", true, func(r *Feature) *string { return &r.Cluster }),
	u64Col("requests", func(r *Feature) *uint64 { return &r.Requests }),
	u64Col("errors", func(r *Feature) *uint64 { return &r.Errors }),
	f64Col("arrival_rps", func(r *Feature) *float64 { return &r.ArrivalRPS }),
	f64Col("in_flight", func(r *Feature) *float64 { return &r.InFlight }),
	f64Col("ttft_p50_ms", func(r *Feature) *float64 { return &r.TTFTP50Ms }),
	f64Col("ttft_p90_ms", func(r *Feature) *float64 { return &r.TTFTP90Ms }),
	f64Col("ttft_p99_ms", func(r *Feature) *float64 { return &r.TTFTP99Ms }),
	f64Col("tbot_p50_ms", func(r *Feature) *float64 { return &r.TBOTP50Ms }),
	f64Col("tbot_p90_ms", func(r *Feature) *float64 { return &r.TBOTP90Ms }),
	f64Col("tbot_p99_ms", func(r *Feature) *float64 { return &r.TBOTP99Ms }),
	f64Col("error_rate", func(r *Feature) *float64 { return &r.ErrorRate }),
	f64Col("cache_hit_ratio", func(r *Feature) *float64 { return &r.CacheHitRatio }),
	f64Col("utilization", func(r *Feature) *float64 { return &r.Utilization }),
	f64Col("kv_cache_util", func(r *Feature) *float64 { return &r.KVCacheUtil }),
	u32Col("ready_replicas", func(r *Feature) *uint32 { return &r.ReadyReplicas }),
	boolCol("healthy", func(r *Feature) *bool { return &r.Healthy }),
	u64Col("status_events", func(r *Feature) *uint64 { return &r.StatusEvents }),
	u64Col("late_events", func(r *Feature) *uint64 { return &r.LateEvents }),
	optional(strCol("class", true, func(r *Feature) *string { return &r.Class })),
	optional(f64Col("prompt_tokens_mean", func(r *Feature) *float64 { return &r.PromptTokensMean })),
	optional(f64Col("output_tokens_mean", func(r *Feature) *float64 { return &r.OutputTokensMean })),
	optional(f64Col("uncached_sq_mean", func(r *Feature) *float64 { return &r.UncachedSqMean })),
}

// optional marks a column appended after its table's version was first
// written: readers accept records from older writers without it.
func optional[T any](c column[T]) column[T] {
	c.optional = true
	return c
}

// profileColumns is the profile table; versioned like featureColumns.
var profileColumns = []column[Profile]{
	strCol("engine", true, func(r *Profile) *string { return &r.Engine }),
	strCol("sku", false, func(r *Profile) *string { return &r.SKU }),
	timeCol("fitted_at", func(r *Profile) *int64 { return &r.FittedAtUnixNano }),
	f64Col("capacity_rps", func(r *Profile) *float64 { return &r.CapacityRPS }),
	f64Col("slo_capacity_rps", func(r *Profile) *float64 { return &r.SLOCapacityRPS }),
	f64Col("ttft_base_ms", func(r *Profile) *float64 { return &r.TTFTBaseMs }),
	f64Col("ttft_queue_ms", func(r *Profile) *float64 { return &r.TTFTQueueMs }),
	f64Col("tbot_base_ms", func(r *Profile) *float64 { return &r.TBOTBaseMs }),
	f64Col("tbot_slope_ms", func(r *Profile) *float64 { return &r.TBOTSlopeMs }),
	f64Col("ttft_r2", func(r *Profile) *float64 { return &r.TTFTR2 }),
	f64Col("tbot_r2", func(r *Profile) *float64 { return &r.TBOTR2 }),
	u64Col("samples", func(r *Profile) *uint64 { return &r.Samples }),
	f64Col("load_min_rps", func(r *Profile) *float64 { return &r.LoadMinRPS }),
	f64Col("load_max_rps", func(r *Profile) *float64 { return &r.LoadMaxRPS }),
}

// FeatureSchema and ProfileSchema are the Arrow schemas of the feature
// and profile tables, with metadata "ilb.schema" naming the version.
// Treat them as read-only.
var (
	FeatureSchema = tableSchema(FeatureSchemaVersion, featureColumns)
	ProfileSchema = tableSchema(ProfileSchemaVersion, profileColumns)
)

// FeaturesToRecord builds a record batch of rows with FeatureSchema,
// allocating from mem (memory.DefaultAllocator if nil). The caller must
// Release it.
func FeaturesToRecord(mem memory.Allocator, rows []Feature) arrow.RecordBatch {
	return toRecord(mem, FeatureSchema, featureColumns, rows)
}

// FeaturesFromRecord reads the rows of a feature record batch. The record
// must carry metadata ilb.schema = features/v1 and every feature column
// with its type; extra columns are ignored. Strings are copied, so the
// rows stay valid after rec is released. Rows are not validated.
func FeaturesFromRecord(rec arrow.RecordBatch) ([]Feature, error) {
	rows, err := fromRecord(rec, FeatureSchemaVersion, featureColumns)
	if err != nil {
		return nil, fmt.Errorf("schemas: features from record: %w", err)
	}
	return rows, nil
}

// ProfilesToRecord builds a record batch of rows with ProfileSchema; the
// caller must Release it.
func ProfilesToRecord(mem memory.Allocator, rows []Profile) arrow.RecordBatch {
	return toRecord(mem, ProfileSchema, profileColumns, rows)
}

// ProfilesFromRecord reads the rows of a profile record batch, with the
// same rules as FeaturesFromRecord (metadata profiles/v1).
func ProfilesFromRecord(rec arrow.RecordBatch) ([]Profile, error) {
	rows, err := fromRecord(rec, ProfileSchemaVersion, profileColumns)
	if err != nil {
		return nil, fmt.Errorf("schemas: profiles from record: %w", err)
	}
	return rows, nil
}
