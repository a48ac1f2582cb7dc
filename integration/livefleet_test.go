package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// liveFleet is the acceptance run for live fleet changes, with
// the ilb binary as separate processes (brokers, two engine simulators,
// aggregator, optimizer, data plane), all reading one fleet file that the
// test edits while chat completions flow through the data plane:
//
//  1. engine e-2 (served by the second simulator) is added to the file:
//     the optimizer gives it weight in a snapshot without a restart, and
//     the data plane sends it requests;
//  2. the file is broken (a misspelled field): nothing changes, the
//     rejection is counted by the optimizer and the data plane;
//  3. e-2 is removed: the next snapshot has no weight for it, it drains
//     (no new conversation goes to it) and no request fails.
func liveFleet(t *testing.T, bin string) {
	dir := t.TempDir()
	brokers := startProc(t, bin, "brokers", "brokers", "--kafka-listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	kafkaAddr := brokers.waitMatch(t, `kafka: (\S+)`)[1]
	natsURL := brokers.waitMatch(t, `nats: (\S+)`)[1]
	brokers.waitMatch(t, `ready;`)
	all := filepath.Join(dir, "all.yaml")
	writeFile(t, all, smallFleet)
	simArgs := func(engines string) []string {
		return []string{"engine-sim", "--kafka", kafkaAddr, "--fleet", all, "--engines", engines, "--http", "127.0.0.1:0",
			"--time-scale", "10", "--status-interval", "200ms"}
	}
	simA := startProc(t, bin, "engine-sim-a", simArgs("e-0,e-1")...).waitMatch(t, `listening on http://(\S+)`)[1]
	simB := startProc(t, bin, "engine-sim-b", simArgs("e-2")...).waitMatch(t, `listening on http://(\S+)`)[1]
	fleetOf := func(engines ...string) string {
		var b strings.Builder
		b.WriteString(smallFleetHead)
		for _, e := range engines {
			sim := simA
			if e == "e-2" {
				sim = simB
			}
			fmt.Fprintf(&b, "  - {name: %s, region: r, %s, url: http://%s/engines/%s}\n", e, smallEngine, sim, e)
		}
		return b.String()
	}
	fleet := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleet, fleetOf("e-0", "e-1"))
	startProc(t, bin, "aggregator", "aggregator", "--kafka", kafkaAddr, "--fleet", fleet, "--window", "1s",
		"--http", "127.0.0.1:0", "--log-level", "warn").waitMatch(t, `features on http://`)
	opt := startProc(t, bin, "optimizer", "optimizer", "--kafka", kafkaAddr, "--nats", natsURL, "--fleet", fleet,
		"--min-interval", "200ms", "--max-interval", "1s", "--http", "127.0.0.1:0")
	optURL := "http://" + opt.waitMatch(t, `state on http://([^/\s]+)`)[1]
	dp := startProc(t, bin, "dataplane", "dataplane", "--cluster", "fe-a", "--kafka", kafkaAddr, "--nats", natsURL,
		"--fleet", fleet, "--http", "127.0.0.1:0", "--drain-timeout", "3s")
	dpURL := "http://" + dp.waitMatch(t, `on http://(\S+) \(weights`)[1]

	c := httpClient(t, 10*time.Second)
	waitUntil(t, 30*time.Second, "the first snapshot", func() bool { return routingOK(c, dpURL) })
	traffic := startChats(c, dpURL, "fe-a")
	defer traffic.stop()

	// 1. Add e-2.
	writeFile(t, fleet, fleetOf("e-0", "e-1", "e-2"))
	added := time.Now()
	waitUntil(t, 20*time.Second, "e-2 weighted in a snapshot", func() bool { return routing(t, c, dpURL, "fe-a").Weights["e-2"] > 0 })
	v := routing(t, c, dpURL, "fe-a")
	waitUntil(t, 20*time.Second, "requests served by e-2", func() bool { return traffic.servedBy("e-2") > 0 })
	t.Logf("e-2 added: weight %.2f at v%d %v after the edit; %d requests served by it",
		v.Weights["e-2"], v.Version, time.Since(added).Round(100*time.Millisecond), traffic.servedBy("e-2"))

	// 2. A broken file changes nothing.
	before := routing(t, c, dpURL, "fe-a")
	writeFile(t, fleet, strings.Replace(fleetOf("e-0", "e-1"), "max_batch:", "max_batchh:", 1))
	waitUntil(t, 10*time.Second, "both services to reject the broken file", func() bool {
		return metricSum(c, optURL, "ilb_fleetwatch_reloads_total", `result="rejected"`) >= 1 &&
			metricSum(c, dpURL, "ilb_fleetwatch_reloads_total", `result="rejected"`) >= 1
	})
	time.Sleep(1500 * time.Millisecond)
	if after := routing(t, c, dpURL, "fe-a"); after.Weights["e-2"] == 0 || after.Version < before.Version {
		t.Errorf("after a broken fleet file: e-2 weight %v, v%d (before v%d); want e-2 still weighted", after.Weights["e-2"], after.Version, before.Version)
	}

	// 3. Remove e-2: weight 0 in the next snapshot, then no new requests.
	writeFile(t, fleet, fleetOf("e-0", "e-1"))
	removed := time.Now()
	waitUntil(t, 20*time.Second, "a snapshot without e-2", func() bool { return routing(t, c, dpURL, "fe-a").Weights["e-2"] == 0 })
	gone := time.Since(removed)
	time.Sleep(4 * time.Second) // the drain timeout, and then some
	servedBefore := traffic.servedBy("e-2")
	time.Sleep(2 * time.Second)
	if n := traffic.servedBy("e-2") - servedBefore; n != 0 {
		t.Errorf("%d requests served by e-2 after it drained", n)
	}
	traffic.stop()
	sent, failed := traffic.counts()
	if failed != 0 || sent < 100 {
		t.Errorf("%d of %d requests failed (want 0 of at least 100)", failed, sent)
	}
	t.Logf("e-2 removed: weight 0 %v after the edit; %d requests, %d failed, %d served by e-2 in all",
		gone.Round(100*time.Millisecond), sent, failed, traffic.servedBy("e-2"))
}

// chatLoop sends chat completions, turns of 40 conversations in turn
// plus a new conversation every fifth request, and counts by engine.
type chatLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu     sync.Mutex
	sent   int
	failed int
	by     map[string]int
	errs   []string
}

func startChats(c *http.Client, base, cluster string) *chatLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &chatLoop{cancel: cancel, done: make(chan struct{}), by: map[string]int{}}
	go func() {
		defer close(l.done)
		for i := 0; ctx.Err() == nil; i++ {
			conv := "conv-" + strconv.Itoa(i%40)
			if i%5 == 0 {
				conv = "new-" + strconv.Itoa(i)
			}
			a, err := chatInBody(ctx, c, base, cluster, conv, 4)
			if ctx.Err() != nil {
				return
			}
			l.record(a, err)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

func (l *chatLoop) record(a chatAnswer, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	if err != nil || a.Code != http.StatusOK {
		l.failed++
		l.errs = append(l.errs, fmt.Sprintf("%d %v", a.Code, err))
		return
	}
	l.by[a.Engine]++
}

func (l *chatLoop) servedBy(engine string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[engine]
}

func (l *chatLoop) counts() (sent, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, l.failed
}

func (l *chatLoop) stop() { l.once.Do(func() { l.cancel(); <-l.done }) }

// metricSum sums the samples of name whose labels contain match (any
// sample, labelled or not, for ""), from a service's /metrics; 0 when
// unreachable.
func metricSum(c *http.Client, base, name, match string) float64 {
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{([^}]*)\})? (\S+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], match) {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum += v
		}
	}
	return sum
}
