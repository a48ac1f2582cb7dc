package optimizer

import (
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// The event clock after a fleet change: an engine removed from the fleet
// stops holding windows back at once, even while it still reports; an
// engine added is awaited only from its first report.
func TestTicksFollowFleetChanges(t *testing.T) {
	tk := newTicks(tickFleet(t), time.Hour)
	t0 := time.Unix(1000, 0)
	tk.addFeatures([]schemas.Feature{row("e0", "", 10), row("e1", "", 10)}, -1, t0)
	if _, ok := tk.ready(t0); ok {
		t.Fatal("window 10 ready without e2, which the fleet lists")
	}
	tk.setEngines(tickFleet(t, "e0", "e1"))
	end, ok := tk.ready(t0)
	if !ok || end != 10*sec {
		t.Fatalf("after e2's removal ready = %d, %v; want window 10", end, ok)
	}
	tk.take(end)
	// e2 still reports while it drains: it is not awaited again.
	tk.addFeatures([]schemas.Feature{row("e0", "", 20), row("e1", "", 20), row("e2", "", 20)}, -1, t0)
	if end, ok := tk.ready(t0); !ok || end != 20*sec {
		t.Fatalf("window 20: ready = %d, %v", end, ok)
	}
	tk.take(20 * sec)
	if _, ok := tk.lastSeen["e2"]; ok {
		t.Error("the removed engine is awaited again after it reported")
	}
	// e3 joins: it is not awaited until it reports ...
	tk.setEngines(tickFleet(t, "e0", "e1", "e3"))
	tk.addFeatures([]schemas.Feature{row("e0", "", 40), row("e1", "", 40)}, -1, t0)
	if end, ok := tk.ready(t0); !ok || end != 40*sec {
		t.Fatalf("window 40 held back by e3, which never reported: ready = %d, %v", end, ok)
	}
	tk.take(40 * sec)
	// ... and from its first report on it is.
	tk.addFeatures([]schemas.Feature{row("e0", "", 50), row("e1", "", 50), row("e3", "", 50)}, -1, t0)
	tk.take(50 * sec)
	tk.addFeatures([]schemas.Feature{row("e0", "", 60), row("e1", "", 60)}, -1, t0)
	if _, ok := tk.ready(t0); ok {
		t.Error("window 60 ready without e3, which reported in window 50")
	}
}
