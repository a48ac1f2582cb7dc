package integration

import (
	"testing"
	"time"
)

// pendingSyncProcesses: two `ilb dataplane` processes of different
// clusters, on the NATS of `ilb brokers` over real TCP, hear each other's
// pending prefill (services/dataplane README, "Pending prefill"): each
// reports the other as a peer and has taken its messages, with no weights
// published yet (the sharing does not wait for a snapshot). Both exit 0 on
// SIGTERM.
func pendingSyncProcesses(t *testing.T, bin string) {
	brokers := startProc(t, bin, "brokers", "brokers", "--kafka-listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	natsURL := brokers.waitMatch(t, `nats: (\S+)`)[1]
	brokers.waitMatch(t, `ready;`)
	start := func(cluster string) (*proc, string) {
		p := startProc(t, bin, "dataplane-"+cluster, "dataplane", "--cluster", cluster, "--nats", natsURL, "--no-kafka",
			"--engine", "e-0=http://127.0.0.1:9", "--http", "127.0.0.1:0", "--pending-sync", "50ms")
		return p, "http://" + p.waitMatch(t, `on http://(\S+) \(weights`)[1]
	}
	a, aURL := start("fe-a")
	b, bURL := start("fe-b")
	c := httpClient(t, 5*time.Second)
	for _, u := range []string{aURL, bURL} {
		waitUntil(t, 20*time.Second, u+" hears the other data plane", func() bool {
			return metricSum(c, u, "ilb_dataplane_pending_sync_peers", "") == 1 &&
				metricSum(c, u, "ilb_dataplane_pending_sync_messages_total", `result="taken"`) > 0
		})
		if bad := metricSum(c, u, "ilb_dataplane_pending_sync_messages_total", `result="bad"`); bad != 0 {
			t.Errorf("%s: %v bad pending-prefill messages", u, bad)
		}
	}
	for _, p := range []*proc{a, b, brokers} {
		if code := p.stop(t); code != 0 {
			t.Errorf("%s exited with status %d on SIGTERM, want 0", p.name, code)
		}
	}
}
