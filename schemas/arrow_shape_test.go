package schemas

import (
	"errors"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFeatureShapeColumns: the request-shape columns (appended to
// features/v1) round-trip, records of older writers without them read as
// 0 (shape unknown), and a negative or non-finite mean is invalid.
func TestFeatureShapeColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := []Feature{{WindowStartUnixNano: 1, WindowEndUnixNano: 2, Engine: "e", Requests: 4,
		PromptTokensMean: 12000, OutputTokensMean: 343, UncachedSqMean: 2.5e8}}
	rec := FeaturesToRecord(mem, rows)
	got, err := FeaturesFromRecord(rec)
	rec.Release()
	if err != nil || got[0] != rows[0] {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	old := featureColumns[:len(featureColumns)-3]
	rec = toRecord(mem, tableSchema(FeatureSchemaVersion, old), old, rows)
	defer rec.Release()
	got, err = FeaturesFromRecord(rec)
	if err != nil || got[0].PromptTokensMean != 0 || got[0].OutputTokensMean != 0 || got[0].UncachedSqMean != 0 || got[0].Requests != 4 {
		t.Fatalf("record without the shape columns: %+v, %v", got, err)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		r := rows[0]
		r.UncachedSqMean = bad
		if err := r.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("uncached_sq_mean %v: %v, want ErrInvalid", bad, err)
		}
	}
}
