package dataplane

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// syncedDP is a data plane for cluster, sharing pending prefill over the
// NATS server at url every 20 ms, running until the test ends or stop is
// called.
func syncedDP(t *testing.T, url, cluster string, eng *engineStub) (d *DataPlane, stop func(), metrics http.Handler) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cfg := testConfig(cluster)
	cfg.EngineURLs = engineURLs(eng)
	cfg.PendingSync = 20 * time.Millisecond
	deps, tel := withTelemetry(t)
	deps.NATS, deps.Now = nc, time.Now
	d = newDP(t, cfg, deps)
	mustSet(t, d, snap(cluster, 1, map[string]float64{eng.name: 1}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = d.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	// Run subscribes in its own goroutine: a test that publishes before
	// the server has the subscription loses its messages (core NATS keeps
	// none), which flaked under -race on a loaded machine. The flush's
	// round trip comes back after the server has processed the SUB.
	waitFor(t, 5*time.Second, cluster+"'s pending sync subscribed", func() bool { return nc.NumSubscriptions() > 0 })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return d, stop, tel.MetricsHandler()
}

// liveOf is engine name's live view in d.
func liveOf(d *DataPlane, name string) *live {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &d.reg.getLocked(name).live
}

// TestPendingSyncSharesPrefill: a prompt one data plane has sent and not
// seen answered shows, within a few sync intervals, in the other's view
// of that engine (live.remote), and leaves it when the answer starts; a
// data plane that stops publishing stops counting after pendingTTL.
func TestPendingSyncSharesPrefill(t *testing.T) {
	url := streamstest.NATS(t)
	eng := newEngine(t, "eng-a")
	a, stopA, _ := syncedDP(t, url, "fe-a", eng)
	b, _, bMetrics := syncedDP(t, url, "fe-b", eng)

	// The answer's headers wait 3 s: the prompt is pending that long, the
	// time b has to see it (800 ms flaked under -race on a loaded machine).
	eng.delay.Store(int64(3 * time.Second))
	done := make(chan int, 1)
	go func() { done <- chatSized(a.Handler(), "long-prompt", 40000) }()
	own := liveOf(a, "eng-a")
	waitFor(t, 2*time.Second, "a's own pending prefill", func() bool { return own.pending.Load() > 0 })
	want := own.pending.Load()
	if want < 10000 {
		t.Fatalf("a's pending prefill %d tokens for a 40 kB prompt", want)
	}
	remote := liveOf(b, "eng-a")
	waitFor(t, 2500*time.Millisecond, "b sees a's pending prefill", func() bool { return remote.remote.Load() == want })
	if got := liveOf(a, "eng-a").remote.Load(); got != 0 {
		t.Errorf("a counts its own pending prefill as another's: %d", got)
	}
	if got := metricValue(t, bMetrics, metricPendingPeers, nil); got != 1 {
		t.Errorf("%s = %v in b, want 1 (a)", metricPendingPeers, got)
	}
	if code := <-done; code != 200 {
		t.Fatalf("request: %d", code)
	}
	waitFor(t, 2*time.Second, "b forgets a's answered prompt", func() bool { return remote.remote.Load() == 0 })

	// A data plane that stops publishing stops counting after the TTL.
	go func() { done <- chatSized(a.Handler(), "another", 40000) }()
	waitFor(t, 2500*time.Millisecond, "b sees a's second prompt", func() bool { return remote.remote.Load() > 0 })
	stopA()
	start := time.Now()
	waitFor(t, pendingTTL(20*time.Millisecond)+2*time.Second, "b forgets a silent data plane", func() bool { return remote.remote.Load() == 0 })
	if waited := time.Since(start); waited < pendingTTL(20*time.Millisecond)/2 {
		t.Errorf("a silent peer forgotten after %v, before its TTL", waited)
	}
	<-done
}

// TestPendingSyncBadMessages: undecodable and invalid messages are
// counted and change nothing; a message older than one taken from its
// source is stale; a process's own messages are not counted as another's.
func TestPendingSyncBadMessages(t *testing.T) {
	url := streamstest.NATS(t)
	eng := newEngine(t, "eng-a")
	b, _, metrics := syncedDP(t, url, "fe-b", eng)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pub := func(s string) {
		t.Helper()
		if err := nc.Publish(schemas.SubjectPending, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	pub(`not json`)
	pub(`{"source":"x","seq":0,"engines":{"eng-a":5}}`)
	pub(`{"source":"x","seq":1,"engines":{"eng-a":-5}}`)
	pub(fmt.Sprintf(`{"source":%q,"seq":99,"engines":{"eng-a":7}}`, b.pending.source)) // its own
	pub(`{"source":"peer","seq":5,"engines":{"eng-a":300,"unknown-engine":9}}`)
	pub(`{"source":"peer","seq":4,"engines":{"eng-a":1000}}`) // older
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	count := func(result string) float64 {
		return metricValue(t, metrics, metricPendingSync, map[string]string{"result": result})
	}
	waitFor(t, 3*time.Second, "the messages counted", func() bool { return count(pendingBad) == 3 && count(pendingStale) == 1 })
	remote := liveOf(b, "eng-a")
	waitFor(t, time.Second, "the peer's figure taken", func() bool { return remote.remote.Load() == 300 })
	if got := count(pendingTaken); got != 1 {
		t.Errorf("taken %v messages, want 1 (the peer's newest)", got)
	}
	b.mu.Lock()
	_, registered := b.reg.byName["unknown-engine"]
	b.mu.Unlock()
	if registered {
		t.Error("an engine named only by a peer's message was registered")
	}
	waitFor(t, 3*time.Second, "b's own messages published", func() bool { return count(pendingPublished) >= 1 })
}

// TestLoadSharesPendingWhenAsked: the load counts the other data planes'
// pending prefill only when shared.
func TestLoadSharesPendingWhenAsked(t *testing.T) {
	e := &engine{name: "e"}
	e.live.observeStatusLocked(&schemas.EngineStatus{Waiting: 1, Running: 2})
	e.live.pending.Store(1000)
	e.live.remote.Store(3000)
	s := &slot{eng: e, limit: 4}
	if got, want := s.load(1000, false), (1.0+2+1)/4; got != want {
		t.Errorf("own view: load %v, want %v", got, want)
	}
	if got, want := s.load(1000, true), (1.0+2+4)/4; got != want {
		t.Errorf("shared view: load %v, want %v", got, want)
	}
}

// The sync's interval must not be negative.
func TestPendingSyncValidated(t *testing.T) {
	cfg := testConfig("fe-a")
	cfg.PendingSync = -time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PendingSync") {
		t.Fatalf("Validate() = %v, want an error naming PendingSync", err)
	}
}

// TestPickAvoidsOthersPrefill: a new conversation avoids the engine where
// other data planes have prefill pending (live.remote), unless its
// cluster sheds, when only this process's own view counts.
func TestPickAvoidsOthersPrefill(t *testing.T) {
	clk := newClock(t0)
	d := newDP(t, testConfig("fe-a"), Deps{Now: clk.Now})
	s := snap("fe-a", 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5})
	s.QueueLimits = map[string]float64{"eng-a": 10, "eng-b": 10}
	mustSet(t, d, s)
	for _, e := range []string{"eng-a", "eng-b"} {
		d.ObserveStatus(schemas.EngineStatus{Engine: e, TimeUnixNano: 1, Health: schemas.HealthHealthy, ReadyReplicas: 1, TotalReplicas: 1})
	}
	c, _ := d.cluster("fe-a")
	c.observePrompt(1000)
	liveOf(d, "eng-a").remote.Store(50_000) // fifty mean prompts other front ends sent
	share := func(prefix string) float64 {
		onA, n := 0, 400
		for i := range n {
			if pickName(t, d, "fe-a", prefix+strconv.Itoa(i)) == "eng-a" {
				onA++
			}
		}
		return float64(onA) / float64(n)
	}
	// Of four candidates drawn from a 50/50 table, all four are eng-a
	// for 1/16 of the keys.
	if got := share("new-"); got > 0.1 {
		t.Errorf("%.3f of new conversations went to the engine with others' prefill pending, want about 1/16", got)
	}
	shedding := snap("fe-a", 2, map[string]float64{"eng-a": 0.45, "eng-b": 0.45})
	shedding.ShedFraction, shedding.QueueLimits = 0.1, s.QueueLimits
	mustSet(t, d, shedding)
	c.newShare.Store(math.Float64bits(1))
	onA, kept := 0, 0
	for i := range 400 {
		name, err := tryPick(d, "fe-a", "shedding-"+strconv.Itoa(i))
		if errors.Is(err, ErrShed) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		kept++
		if name == "eng-a" {
			onA++
		}
	}
	if got := float64(onA) / float64(kept); got < 0.3 {
		t.Errorf("while shedding, %.3f of new conversations went to eng-a: the others' prefill still counted", got)
	}
}
