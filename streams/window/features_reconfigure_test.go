package window

import (
	"errors"
	"testing"

	"github.com/ilb-router/ilb/schemas"
)

// A fleet change mid-run: an engine the fleet did not know gets a
// utilization once its max batch arrives, for the events after the
// change; changing the window geometry is refused and changes nothing.
func TestFeaturesReconfigure(t *testing.T) {
	cfg := featureConfig() // e1: max batch 8
	f, err := NewFeatures(cfg)
	if err != nil {
		t.Fatal(err)
	}
	add := func(ev schemas.Event) { f.Add(Untracked, &ev) }
	add(status("e2", 1, 4, 0, 1, 0.1, schemas.HealthHealthy)) // e2 unknown: no utilization
	next := cfg
	next.MaxBatchPerReplica = map[string]int{"e1": 8, "e2": 16}
	next.Classify = func(string, string, uint32) string { return "m/short" }
	if err := f.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	next.MaxBatchPerReplica["e2"] = 1 // the caller's map is copied
	add(status("e2", 2, 8, 0, 1, 0.1, schemas.HealthHealthy))
	add(completion("e2", "fe-a", 3, 100, 20, 10, 100, 0, ""))
	bad := next
	bad.Window.Size *= 2
	if err := f.Reconfigure(bad); !errors.Is(err, ErrConfig) {
		t.Errorf("window size change: %v, want ErrConfig", err)
	}
	rows := f.Flush(nil)
	var e2, pair *schemas.Feature
	for i := range rows {
		switch r := &rows[i]; {
		case r.Engine == "e2" && r.Cluster == "":
			e2 = r
		case r.Engine == "e2":
			pair = r
		}
	}
	if e2 == nil || pair == nil {
		t.Fatalf("rows %+v", rows)
	}
	if e2.Utilization != 0.5 { // only the status after the change counts: 8/16
		t.Errorf("e2 utilization %v, want 0.5", e2.Utilization)
	}
	if pair.Class != "m/short" {
		t.Errorf("pair row class %q, want the new Classify's", pair.Class)
	}
}
