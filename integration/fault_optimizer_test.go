package integration

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestFaultOptimizerKilled proves that the request path does not depend on
// the optimizer (DESIGN.md, quality bar: "the data plane keeps serving from
// its last good snapshot when ... the optimizer is down, and says how stale
// it is"). The optimizer is crashed mid-run (its NATS connection drops
// first, so it cannot release its lease, as with kill -9) while a client
// asks the data plane for a pick every 10 ms. During the 3 s outage:
// every pick succeeds, on the same snapshot version, each conversation on
// the same engine; the snapshot's age rises by the outage's length; past
// --stale-after (1.5 s) the data plane says it is stale and keeps routing
// on the old table. A second optimizer instance then takes over once the
// dead one's 1 s lease has run out, continues from the bucket's state,
// publishes a newer version, and the data plane swaps it in: versions only
// go up. Lost: nothing (zero failed picks).
func TestFaultOptimizerKilled(t *testing.T) {
	checkLeaks(t)
	const staleAfter = 1500 * time.Millisecond
	fleet := parseFleet(t, smallFleet)
	brokers := streamstest.Kafka(t, allTopics...)
	natsURL := streamstest.NATS(t)
	_, log := newLogSink(t, slog.LevelWarn)

	opt1 := startOptimizer(t, fastOptimizer(fleet, "opt-1"), brokers, natsURL, nil, log)
	dp := startDataplane(t, fastDataplane(staleAfter, "fe-a"), dataplaneDeps{natsURL: natsURL, log: log, name: "dp"})
	waitUntil(t, 15*time.Second, "the first snapshot at the data plane", func() bool { return dp.ready("fe-a") })
	picks := startPicks(t, dp.url, "fe-a", 10*time.Millisecond, 200)
	c := httpClient(t, 5*time.Second)
	waitUntil(t, 10*time.Second, "three published versions", func() bool { return routing(t, c, dp.url, "fe-a").Version >= 3 })

	opt1.crash(t)
	before := routing(t, c, dp.url, "fe-a")
	time.Sleep(3 * time.Second)
	during := routing(t, c, dp.url, "fe-a")
	if during.Version != before.Version {
		t.Errorf("version moved from %d to %d with the optimizer dead", before.Version, during.Version)
	}
	if rise := during.AgeSeconds - before.AgeSeconds; rise < 2.5 {
		t.Errorf("snapshot age rose by %.2f s over a 3 s outage; it must keep counting", rise)
	}
	if !during.Stale {
		t.Errorf("snapshot %.1f s old is not marked stale (stale after %v)", during.AgeSeconds, staleAfter)
	}
	mid := picks.counts()

	opt2 := startOptimizer(t, fastOptimizer(fleet, "opt-2"), brokers, natsURL, nil, log)
	waitUntil(t, 15*time.Second, "the second optimizer's snapshot at the data plane", func() bool {
		return routing(t, c, dp.url, "fe-a").Version > before.Version
	})
	after := routing(t, c, dp.url, "fe-a")
	if after.Stale {
		t.Error("a fresh snapshot arrived but the data plane still says stale")
	}
	waitUntil(t, 5*time.Second, "opt-2 to report a version above the dead optimizer's", func() bool {
		return opt2.o.State().Version > before.Version
	})
	time.Sleep(300 * time.Millisecond)
	picks.stop()
	pc := picks.counts()
	pc.check(t)
	t.Logf("optimizer killed at v%d for 3 s: %d picks during the outage, %d in all, %d failed; age %.1f → %.1f s, stale; after takeover v%d",
		before.Version, mid.Sent, pc.Sent, pc.Failed, before.AgeSeconds, during.AgeSeconds, after.Version)
}
