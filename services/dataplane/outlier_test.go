package dataplane

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"
)

func engineNames(n int) map[string]float64 {
	w := map[string]float64{}
	for i := range n {
		w[fmt.Sprintf("eng-%02d", i)] = 1 / float64(n)
	}
	return w
}

// TestConsecutive5xxEjectsAndRecovers: Envoy's rule, 5 consecutive 5xx
// eject the engine; its conversations go to their next choice; after the
// ejection time it takes requests again.
func TestConsecutive5xxEjectsAndRecovers(t *testing.T) {
	d, es, h := proxyFixtureDeps(t, Deps{Now: time.Now}, func(c *Config) {
		c.Outlier.BaseEjection = 300 * time.Millisecond
	}, "eng-a", "eng-b", "eng-c")
	runDP(t, d)
	bad := es[1]
	bad.code.Store(500)
	keys := keysOn(t, d, "fe-a", "eng-b", 20)
	for _, k := range keys[:5] {
		if rec := chat(t, h, k, nil); rec.Code != 200 {
			t.Fatalf("%s: %d; the retry should have found a healthy engine", k, rec.Code)
		}
	}
	waited := waitFor(t, 2*time.Second, "eng-b ejected", func() bool { return !available(d, "eng-b") })
	t.Logf("ejected %v after the 5th consecutive 5xx", waited)
	for _, k := range keys[5:] {
		if rec := chat(t, h, k, nil); rec.Code != 200 || rec.Header().Get(HeaderEngine) == "eng-b" {
			t.Fatalf("%s: %d from %s while eng-b is ejected", k, rec.Code, rec.Header().Get(HeaderEngine))
		}
	}
	if got := bad.hits.Load(); got != 5 {
		t.Fatalf("the ejected engine got %d requests, want exactly the 5 that ejected it", got)
	}
	bad.code.Store(0)
	waitFor(t, 2*time.Second, "eng-b back after the ejection time", func() bool { return available(d, "eng-b") })
	if rec := chat(t, h, keys[0], nil); rec.Header().Get(HeaderEngine) != "eng-b" {
		t.Fatalf("after recovery %s went to %s, want eng-b", keys[0], rec.Header().Get(HeaderEngine))
	}
}

func available(d *DataPlane, engine string) bool {
	c, _ := d.cluster("fe-a")
	for _, s := range c.cur.Load().slots {
		if s.eng.name == engine {
			return s.avail
		}
	}
	return false
}

// TestEjectionCap follows Envoy's max_ejection_percent (default 10%):
// eject while the ejected share is below it, so one engine can always be
// ejected, two once there are more than 10, three past 20.
func TestEjectionCap(t *testing.T) {
	for _, tc := range []struct{ engines, maxEjected int }{{2, 1}, {4, 1}, {10, 1}, {11, 2}, {20, 2}, {21, 3}} {
		t.Run(strconv.Itoa(tc.engines), func(t *testing.T) {
			d := newDP(t, testConfig("fe-a"), Deps{})
			mustSet(t, d, snap("fe-a", 1, engineNames(tc.engines)))
			now := d.now()
			d.mu.Lock()
			defer d.mu.Unlock()
			n := 0
			for _, e := range d.routedLocked() {
				if d.ejectLocked(e, now, ejectConsecutive) {
					n++
				}
			}
			if n != tc.maxEjected {
				t.Fatalf("%d engines: ejected %d, want %d", tc.engines, n, tc.maxEjected)
			}
		})
	}
}

// TestEjectionTimeGrows: base × times ejected, capped at the maximum.
func TestEjectionTimeGrows(t *testing.T) {
	clk := newClock(t0)
	cfg := testConfig("fe-a")
	cfg.Outlier.BaseEjection, cfg.Outlier.MaxEjection = 30*time.Second, 70*time.Second
	d := newDP(t, cfg, Deps{Now: clk.Now})
	mustSet(t, d, snap("fe-a", 1, engineNames(2)))
	e := d.reg.byName["eng-00"]
	for _, want := range []time.Duration{30 * time.Second, 60 * time.Second, 70 * time.Second} {
		d.mu.Lock()
		d.ejectLocked(e, clk.Now(), ejectConsecutive)
		got := e.ejectedUntil.Sub(clk.Now())
		d.mu.Unlock()
		if got != want {
			t.Fatalf("ejected for %v, want %v", got, want)
		}
		clk.Advance(got)
		d.mu.Lock()
		d.expireEjectionsLocked(clk.Now())
		d.rebuildLocked(clk.Now())
		d.mu.Unlock()
		if !available(d, "eng-00") {
			t.Fatal("not back after the ejection time")
		}
	}
}

// setOutcomes loads one sweep interval of outcomes into engine name.
func setOutcomes(d *DataPlane, name string, requests, failures int64, latency time.Duration) {
	e := d.reg.byName[name]
	e.requests.Store(requests)
	e.failures.Store(failures)
	e.successes.Store(requests - failures)
	e.latencyUs.Store((requests - failures) * latency.Microseconds())
}

// TestSuccessRateEjection: Envoy's success-rate rule, eject below
// mean − 1.9·stdev among engines with at least 100 requests.
func TestSuccessRateEjection(t *testing.T) {
	for _, tc := range []struct {
		engines int
		ejected bool
	}{
		{5, true},  // a lone outlier's z-score is √(n−1) = 2 > 1.9
		{4, false}, // √3 = 1.73 < 1.9: too few peers to stand out
	} {
		t.Run(strconv.Itoa(tc.engines), func(t *testing.T) {
			cfg := testConfig("fe-a")
			cfg.Outlier.MinHosts = 2
			cfg.Outlier.MaxEjectionPercent = 100
			d := newDP(t, cfg, Deps{})
			mustSet(t, d, snap("fe-a", 1, engineNames(tc.engines+1)))
			for i := range tc.engines {
				setOutcomes(d, fmt.Sprintf("eng-%02d", i+1), 200, 0, 10*time.Millisecond)
			}
			setOutcomes(d, "eng-01", 200, 100, 10*time.Millisecond)
			setOutcomes(d, "eng-00", 50, 50, 0) // below the request volume: ignored
			d.mu.Lock()
			d.sweepLocked(d.now())
			d.rebuildLocked(d.now())
			d.mu.Unlock()
			if got := !available(d, "eng-01"); got != tc.ejected {
				t.Fatalf("eng-01 at 50%% success among %d: ejected = %v, want %v", tc.engines, got, tc.ejected)
			}
			if !available(d, "eng-00") {
				t.Fatal("engine below the request volume was ejected")
			}
		})
	}
}

// TestLatencyOutlierLosesNewConversations: an engine whose latency stands
// out loses LatencyPenaltyShare of its new conversations until a sweep
// finds it in line; ongoing conversations stay.
func TestLatencyOutlierLosesNewConversations(t *testing.T) {
	d := newDP(t, testConfig("fe-a"), Deps{})
	mustSet(t, d, snap("fe-a", 1, engineNames(6)))
	ongoing := keysOn(t, d, "fe-a", "eng-03", 200)
	for _, k := range ongoing {
		pickName(t, d, "fe-a", k)
	}
	sweep := func(slow time.Duration) {
		for i := range 6 {
			setOutcomes(d, fmt.Sprintf("eng-%02d", i), 150, 0, 20*time.Millisecond)
		}
		setOutcomes(d, "eng-03", 150, 0, slow)
		d.mu.Lock()
		d.sweepLocked(d.now())
		d.rebuildLocked(d.now())
		d.mu.Unlock()
	}
	sweep(400 * time.Millisecond)
	fresh := keysOn(t, d, "fe-a", "eng-03", 2200)[200:]
	moved := 0
	for _, k := range fresh {
		if pickName(t, d, "fe-a", k) != "eng-03" {
			moved++
		}
	}
	if share := float64(moved) / float64(len(fresh)); math.Abs(share-0.5) > 0.05 {
		t.Fatalf("latency outlier lost %.3f of its new conversations, want 0.5", share)
	}
	for _, k := range ongoing {
		if got := pickName(t, d, "fe-a", k); got != "eng-03" {
			t.Fatalf("ongoing conversation moved to %s", got)
		}
	}
	sweep(20 * time.Millisecond)
	for _, k := range keysOn(t, d, "fe-a", "eng-03", 3000)[2200:] {
		if got := pickName(t, d, "fe-a", k); got != "eng-03" {
			t.Fatalf("recovered engine still penalised: new key went to %s", got)
		}
	}
}
