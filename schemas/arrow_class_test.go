package schemas

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFeatureClassColumn: the class column (appended to features/v1)
// round-trips, and records of older writers, which lack it, still read.
func TestFeatureClassColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := []Feature{
		{WindowStartUnixNano: 1, WindowEndUnixNano: 2, Engine: "e"},
		{WindowStartUnixNano: 1, WindowEndUnixNano: 2, Engine: "e", Cluster: "fe", Class: "llama-3-70b/0-8192", Requests: 3},
	}
	rec := FeaturesToRecord(mem, rows)
	got, err := FeaturesFromRecord(rec)
	rec.Release()
	if err != nil || got[1].Class != "llama-3-70b/0-8192" || got[0].Class != "" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	old := featureColumns[:slices.IndexFunc(featureColumns, func(c column[Feature]) bool { return c.field.Name == "class" })]
	rec = toRecord(mem, tableSchema(FeatureSchemaVersion, old), old, rows)
	defer rec.Release()
	got, err = FeaturesFromRecord(rec)
	if err != nil || got[1].Class != "" || got[1].Cluster != "fe" || got[1].Requests != 3 {
		t.Fatalf("record without the class column: %+v, %v", got, err)
	}
}
