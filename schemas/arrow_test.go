package schemas

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// poisonAllocator overwrites freed buffers, so rows that still pointed
// into a released record would visibly change.
type poisonAllocator struct{ memory.Allocator }

func (p poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 'X'
	}
	p.Allocator.Free(b)
}

func newCheckedAllocator(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(poisonAllocator{memory.NewGoAllocator()})
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func sampleFeatures() []Feature {
	start := eventTime
	return []Feature{
		{WindowStartUnixNano: start, WindowEndUnixNano: start + 10e9, Engine: "east-h100-0",
			Requests: 120, Errors: 2, ArrivalRPS: 12, InFlight: 41.5, TTFTP50Ms: 180, TTFTP90Ms: 420,
			TTFTP99Ms: 910, TBOTP50Ms: 31, TBOTP90Ms: 38, TBOTP99Ms: 52.5, ErrorRate: 2.0 / 120,
			CacheHitRatio: 0.62, Utilization: 0.71, KVCacheUtil: 0.55, ReadyReplicas: 2, Healthy: true,
			StatusEvents: 10, LateEvents: 1},
		{WindowStartUnixNano: start, WindowEndUnixNano: start + 10e9, Engine: "east-h100-0",
			Cluster: "fe-west", Requests: 30, ArrivalRPS: 3, TTFTP50Ms: 260, CacheHitRatio: 0.4},
		{WindowStartUnixNano: start, WindowEndUnixNano: start + 10e9, Engine: "eu-a100-0",
			Utilization: math.Inf(1), TTFTP99Ms: math.NaN()}, // not valid, but carried faithfully
	}
}

func TestFeaturesRoundTrip(t *testing.T) {
	mem := newCheckedAllocator(t)
	want := sampleFeatures()
	rec := FeaturesToRecord(mem, want)
	if rec.NumRows() != 3 || !rec.Schema().Equal(FeatureSchema) {
		t.Fatalf("record has %d rows, schema %v", rec.NumRows(), rec.Schema())
	}
	if cl := rec.Column(3).(*array.String); !cl.IsNull(0) || cl.Value(1) != "fe-west" {
		t.Errorf("cluster column: engine-level row should be null, got %v", cl)
	}
	got, err := FeaturesFromRecord(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	// NaN != NaN: compare that row's p99 separately.
	if !math.IsNaN(got[2].TTFTP99Ms) {
		t.Errorf("NaN became %v", got[2].TTFTP99Ms)
	}
	got[2].TTFTP99Ms, want[2].TTFTP99Ms = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip (after release):\n got %+v\nwant %+v", got, want)
	}
}

func TestProfilesRoundTripOverIPC(t *testing.T) {
	mem := newCheckedAllocator(t)
	want := []Profile{
		{Engine: "east-h100-0", SKU: "h100", FittedAtUnixNano: eventTime, CapacityRPS: 3.6, TTFTBaseMs: 150,
			TTFTQueueMs: 40, TBOTBaseMs: 29.6, TBOTSlopeMs: 15, TTFTR2: 0.93, TBOTR2: -0.2, Samples: 48,
			LoadMinRPS: 0.5, LoadMaxRPS: 3.1},
		{SKU: "a100", FittedAtUnixNano: eventTime, CapacityRPS: 1.9, Samples: 1},
	}
	rec := ProfilesToRecord(mem, want)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(ProfileSchema), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("no record: %v", r.Err())
	}
	got, err := ProfilesFromRecord(r.RecordBatch())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip over IPC:\n got %+v\nwant %+v", got, want)
	}
}

func TestEmptyTables(t *testing.T) {
	mem := newCheckedAllocator(t)
	rec := FeaturesToRecord(mem, nil)
	defer rec.Release()
	got, err := FeaturesFromRecord(rec)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty table: %v rows, %v", len(got), err)
	}
}

// recordWith builds a one-row record from explicit fields and arrays.
func recordWith(t *testing.T, mem memory.Allocator, md arrow.Metadata, fields []arrow.Field, build func(*array.RecordBuilder)) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, &md))
	defer b.Release()
	build(b)
	return b.NewRecordBatch()
}

func TestFromRecordMismatch(t *testing.T) {
	mem := newCheckedAllocator(t)
	v1 := arrow.NewMetadata([]string{SchemaMetadataKey}, []string{ProfileSchemaVersion})
	full := ProfileSchema.Fields()
	withField := func(i int, f arrow.Field) []arrow.Field {
		out := append([]arrow.Field(nil), full...)
		out[i] = f
		return out
	}
	fill := func(b *array.RecordBuilder) {
		for _, fb := range b.Fields() {
			fb.AppendEmptyValue()
		}
	}
	cases := []struct {
		name   string
		md     arrow.Metadata
		fields []arrow.Field
		build  func(*array.RecordBuilder)
		want   string
	}{
		{"no metadata", arrow.Metadata{}, full, fill, `metadata ilb.schema is "", want "profiles/v1"`},
		{"other version", arrow.NewMetadata([]string{SchemaMetadataKey}, []string{"profiles/v2"}), full, fill, `is "profiles/v2"`},
		{"features as profiles", arrow.NewMetadata([]string{SchemaMetadataKey}, []string{FeatureSchemaVersion}), full, fill, `is "features/v1"`},
		{"missing column", v1, full[1:], fill, `column "engine" appears 0 times`},
		{"duplicate column", v1, append(append([]arrow.Field(nil), full...), full[0]), fill, `column "engine" appears 2 times`},
		{"wrong type", v1, withField(11, arrow.Field{Name: "samples", Type: arrow.PrimitiveTypes.Int64}), fill, `column "samples" is int64, want uint64`},
		{"timestamp zone", v1, withField(2, arrow.Field{Name: "fitted_at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}}), fill, `column "fitted_at" is timestamp[ns], want timestamp[ns, tz=UTC]`},
		{"null in required column", v1, withField(1, arrow.Field{Name: "sku", Type: arrow.BinaryTypes.String, Nullable: true}),
			func(b *array.RecordBuilder) { b.Field(0).AppendNull(); b.Field(1).AppendNull(); appendEmptyFrom(b, 2) },
			`column "sku" has 1 nulls`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := recordWith(t, mem, tc.md, tc.fields, tc.build)
			defer rec.Release()
			_, err := ProfilesFromRecord(rec)
			checkErr(t, err, tc.want, ErrSchemaMismatch)
		})
	}
	if _, err := FeaturesFromRecord(nil); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("nil record: %v", err)
	}
}

func appendEmptyFrom(b *array.RecordBuilder, from int) {
	for _, fb := range b.Fields()[from:] {
		fb.AppendEmptyValue()
	}
}

// TestFromRecordTolerant: another writer's record with the columns
// reordered, all nullable (pyarrow's default) and an extra column reads.
func TestFromRecordTolerant(t *testing.T) {
	mem := newCheckedAllocator(t)
	want := sampleFeatures()[:2]
	rec := FeaturesToRecord(mem, want)
	defer rec.Release()
	fields := rec.Schema().Fields()
	cols := rec.Columns()
	var rf []arrow.Field
	var rc []arrow.Array
	for i := len(fields) - 1; i >= 0; i-- {
		f := fields[i]
		f.Nullable = true
		rf, rc = append(rf, f), append(rc, cols[i])
	}
	extraB := array.NewFloat64Builder(mem)
	extraB.AppendValues([]float64{1, 2}, nil)
	extra := extraB.NewArray()
	extraB.Release()
	defer extra.Release()
	rf, rc = append(rf, arrow.Field{Name: "gpu_temp_c", Type: arrow.PrimitiveTypes.Float64}), append(rc, extra)
	md := FeatureSchema.Metadata()
	other := array.NewRecordBatch(arrow.NewSchema(rf, &md), rc, 2)
	defer other.Release()
	got, err := FeaturesFromRecord(other)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestSchemaColumns(t *testing.T) {
	// The column names are a contract documented in README.md.
	names := func(s *arrow.Schema) string {
		var out []string
		for _, f := range s.Fields() {
			out = append(out, f.Name)
		}
		return strings.Join(out, ",")
	}
	const features = "window_start,window_end,engine,cluster,requests,errors,arrival_rps,in_flight," +
		"ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,tbot_p50_ms,tbot_p90_ms,tbot_p99_ms,error_rate," +
		"cache_hit_ratio,utilization,kv_cache_util,ready_replicas,healthy,status_events,late_events,class," +
		"prompt_tokens_mean,output_tokens_mean,uncached_sq_mean"
	const profiles = "engine,sku,fitted_at,capacity_rps,slo_capacity_rps,ttft_base_ms,ttft_queue_ms,tbot_base_ms," +
		"tbot_slope_ms,ttft_r2,tbot_r2,samples,load_min_rps,load_max_rps"
	if got := names(FeatureSchema); got != features {
		t.Errorf("feature columns:\n got %s\nwant %s", got, features)
	}
	if got := names(ProfileSchema); got != profiles {
		t.Errorf("profile columns:\n got %s\nwant %s", got, profiles)
	}
	if v, _ := FeatureSchema.Metadata().GetValue("ilb.schema"); v != "features/v1" {
		t.Errorf("feature schema version %q", v)
	}
	if v, _ := ProfileSchema.Metadata().GetValue("ilb.schema"); v != "profiles/v1" {
		t.Errorf("profile schema version %q", v)
	}
}
