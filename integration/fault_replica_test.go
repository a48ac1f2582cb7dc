package integration

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestFaultReplicaRestartAgrees proves that a conversation keeps its
// engine whichever data plane replica it reaches, across a replica
// restart and a new snapshot. Two data planes serve fe-a from the same
// weights bucket. For one snapshot version, 1,000 conversations get the
// same engine from both. Replica B is then stopped and a fresh process
// (new state, new connections) started in its place: once it has the same
// version it picks exactly as it did before the restart, and as A does.
// Then a new optimizer publishes a newer version: both replicas again
// agree on every conversation, and the share of conversations that moved
// is the minimal churn of the table update (reported). Lost: nothing
// (zero disagreements).
func TestFaultReplicaRestartAgrees(t *testing.T) {
	checkLeaks(t)
	const convs = 1000
	fleet := parseFleet(t, smallFleet)
	brokers := streamstest.Kafka(t, allTopics...)
	natsURL := streamstest.NATS(t)
	_, log := newLogSink(t, slog.LevelWarn)
	c := httpClient(t, 5*time.Second)

	opt := startOptimizer(t, fastOptimizer(fleet, "opt-1"), brokers, natsURL, nil, log)
	replica := func(name string) *dataplaneRun {
		return startDataplane(t, fastDataplane(time.Hour, "fe-a"), dataplaneDeps{natsURL: natsURL, log: log, name: name})
	}
	a, b := replica("dp-a"), replica("dp-b")
	waitUntil(t, 15*time.Second, "version 2 at both replicas", func() bool {
		return routing(t, c, a.url, "fe-a").Version >= 2 && routing(t, c, b.url, "fe-a").Version >= 2
	})
	opt.crash(t) // freeze the version
	v := sameVersion(t, c, a.url, b.url)
	picksA := picksOf(t, c, a.url, v, convs)
	agree(t, "replicas A and B", picksA, picksOf(t, c, b.url, v, convs))
	beforeRestart := picksOf(t, c, b.url, v, convs)

	b.s.stop(t)
	b.nc.Close()
	b2 := replica("dp-b2")
	waitUntil(t, 10*time.Second, "the restarted replica to load the snapshot", func() bool {
		return routing(t, c, b2.url, "fe-a").Version == v
	})
	agree(t, "replica B before and after its restart", beforeRestart, picksOf(t, c, b2.url, v, convs))
	agree(t, "replica A and the restarted B", picksA, picksOf(t, c, b2.url, v, convs))

	opt2 := startOptimizer(t, fastOptimizer(fleet, "opt-2"), brokers, natsURL, nil, log)
	waitUntil(t, 15*time.Second, "a newer version at both replicas", func() bool {
		return routing(t, c, a.url, "fe-a").Version > v && routing(t, c, b2.url, "fe-a").Version > v
	})
	opt2.crash(t)
	opt2Version := sameVersion(t, c, a.url, b2.url)
	nextA := picksOf(t, c, a.url, opt2Version, convs)
	agree(t, "replicas A and B on the new version", nextA, picksOf(t, c, b2.url, opt2Version, convs))
	moved := 0
	for conv, e := range picksA {
		if nextA[conv] != e {
			moved++
		}
	}
	t.Logf("%d conversations: replicas agree on v%d, across B's restart, and on v%d; %d (%.1f%%) moved between the versions",
		convs, v, opt2Version, moved, 100*float64(moved)/convs)
}

// sameVersion waits until both data planes serve one version, with the
// optimizer quiet, and returns it.
func sameVersion(t *testing.T, c *http.Client, a, b string) uint64 {
	t.Helper()
	var v uint64
	waitUntil(t, 10*time.Second, "both replicas on one version", func() bool {
		va, vb := routing(t, c, a, "fe-a").Version, routing(t, c, b, "fe-a").Version
		v = va
		return va == vb
	})
	return v
}

// picksOf asks base for the engine of conversations 0..n-1; every answer
// must come from version v.
func picksOf(t *testing.T, c *http.Client, base string, v uint64, n int) map[string]string {
	t.Helper()
	out := make(map[string]string, n)
	for i := range n {
		conv := fmt.Sprintf("user-%d", i)
		a, err := pick(t.Context(), c, base, "fe-a", conv)
		if err != nil || a.Code != http.StatusOK {
			t.Fatalf("pick %s at %s: status %d, %v", conv, base, a.Code, err)
		}
		if a.Version != v {
			t.Fatalf("pick %s at %s answered from v%d, want v%d", conv, base, a.Version, v)
		}
		out[conv] = a.Engine
	}
	return out
}

// agree fails the test for every conversation the two pick sets differ on.
func agree(t *testing.T, what string, x, y map[string]string) {
	t.Helper()
	diff := 0
	for conv, e := range x {
		if y[conv] != e {
			diff++
		}
	}
	if diff > 0 || len(x) != len(y) {
		t.Errorf("%s: %d of %d conversations picked differently", what, diff, len(x))
	}
}
