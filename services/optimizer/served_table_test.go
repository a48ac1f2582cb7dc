package optimizer

import (
	"testing"

	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/sched"
)

// sameSlots reports whether a and b send every slot to the same engine
// name (the only thing a later sched.Table.Update keeps).
func sameSlots(a, b *sched.Table) bool {
	if a.Slots() != b.Slots() {
		return false
	}
	for s := range a.Slots() {
		if a.Engine(a.PickHash(uint64(s))) != b.Engine(b.PickHash(uint64(s))) {
			return false
		}
	}
	return true
}

// TestServedTableOfWeightsOnly: for a snapshot without a table, the
// table the optimizer assumes a data plane holds (routing.Table) owns the
// slots exactly as the data plane's (sched.Rebalance over every listed
// engine, weight 0 included), so the next update moves the same slots;
// and a snapshot that lists only zero weights (all shed) has no table and
// no error, as in the data plane.
func TestServedTableOfWeightsOnly(t *testing.T) {
	w := map[string]float64{"eng-a": 0.55, "eng-b": 0, "eng-c": 0.3, "eng-d": 0}
	got, err := servedTable("fe-a", routing.RowRouting{Weights: w, Shed: 0.15})
	if err != nil || got == nil {
		t.Fatalf("servedTable: %v, %v", got, err)
	}
	dp, err := sched.Rebalance(nil, []string{"eng-a", "eng-b", "eng-c", "eng-d"}, []float64{0.55, 0, 0.3, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !sameSlots(got, dp) {
		t.Fatalf("slots differ from the data plane's table: counts %v over %v, data plane %v over %v",
			got.Counts(), got.Engines(), dp.Counts(), dp.Engines())
	}
	next := map[string]float64{"eng-a": 0.4, "eng-c": 0.35, "eng-d": 0.25}
	fromOurs, err1 := buildTable(got, next)
	fromDP, err2 := buildTable(dp, next)
	if err1 != nil || err2 != nil || !fromOurs.Equal(fromDP) {
		t.Fatalf("the next update differs: %v %v", err1, err2)
	}

	allShed := routing.RowRouting{Weights: map[string]float64{"eng-a": 0}, Shed: 1}
	if got, err := servedTable("fe-a", allShed); got != nil || err != nil {
		t.Fatalf("all shed: table %v, err %v; want none and no error", got, err)
	}
}
