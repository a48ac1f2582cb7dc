package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/enginesim"
)

// devWeights reads every cluster's weights from ilb dev's /v1/routing.
func devWeights(t *testing.T, base string) map[string]map[string]float64 {
	t.Helper()
	_, b := httpDo(t, "GET", base+"/v1/routing", "")
	var r struct {
		Clusters map[string]struct {
			Weights map[string]float64 `json:"weights"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("routing: %v: %.300s", err, b)
	}
	out := map[string]map[string]float64{}
	for c, v := range r.Clusters {
		out[c] = v.Weights
	}
	return out
}

func engineWeighted(w map[string]map[string]float64, engine string) bool {
	for _, ws := range w {
		if ws[engine] > 0 {
			return true
		}
	}
	return false
}

// ilb dev's live membership: the admin endpoint removes a simulated
// engine (weight 0 in the next snapshots) and adds it back; the watched
// fleet file removes one too; a broken file and an engine that is not
// simulated change nothing.
func TestDevLiveMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ilb dev for ~20 s")
	}
	fleetPath := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleetPath, schemas.ExampleFleetYAML(), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDev(t, "--fleet", fleetPath, "--window", "1s", "--time-scale", "20")
	defer d.stop(t)
	base := d.info.HTTP
	if !strings.HasPrefix(base, "http") {
		base = "http://" + base
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 30 s; weights %v", what, devWeights(t, base))
			}
		}
	}
	waitFor("east-h100-1 weighted", func() bool { return engineWeighted(devWeights(t, base), "east-h100-1") })

	if code, b := httpDo(t, "POST", base+"/v1/dev/engines/east-h100-1/remove", ""); code != 200 {
		t.Fatalf("remove: %d %s", code, b)
	}
	waitFor("a snapshot without east-h100-1", func() bool { return !engineWeighted(devWeights(t, base), "east-h100-1") })
	if code, b := httpDo(t, "POST", base+"/v1/dev/engines/east-h100-1/add", ""); code != 200 {
		t.Fatalf("add: %d %s", code, b)
	}
	waitFor("east-h100-1 weighted again", func() bool { return engineWeighted(devWeights(t, base), "east-h100-1") })
	if code, _ := httpDo(t, "POST", base+"/v1/dev/engines/no-such-engine/add", ""); code != 400 {
		t.Fatalf("adding an engine that is not simulated: %d, want 400", code)
	}

	// The fleet file: broken first (rejected and counted, the fleet in
	// use unchanged), then without east-h100-0.
	broken := strings.Replace(string(schemas.ExampleFleetYAML()), "max_batch:", "max_batchh:", 1)
	if err := os.WriteFile(fleetPath, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("the broken file's rejection counted", func() bool {
		_, m := httpDo(t, "GET", base+"/metrics", "")
		return strings.Contains(string(m), `ilb_fleetwatch_reloads_total{result="rejected"}`)
	})
	if _, b := httpDo(t, "GET", base+"/v1/dev/fleet", ""); !strings.Contains(string(b), `"east-h100-0"`) || strings.Count(string(b), `"east-h100-0"`) != 2 {
		t.Fatalf("after a broken fleet file: %s", b)
	}
	waitFor("east-h100-0 weighted", func() bool { return engineWeighted(devWeights(t, base), "east-h100-0") })
	f := schemas.ExampleFleet()
	f.Engines = slicesDelete(f.Engines, "east-h100-0")
	b, err := schemas.EncodeFleet(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fleetPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("a snapshot without east-h100-0", func() bool { return !engineWeighted(devWeights(t, base), "east-h100-0") })
}

func slicesDelete(es []schemas.FleetEngine, name string) []schemas.FleetEngine {
	var out []schemas.FleetEngine
	for _, e := range es {
		if e.Name != name {
			out = append(out, e)
		}
	}
	return out
}

// devEngines reads the simulated engines from ilb dev's GET /engines.
func devEngines(t *testing.T, base string) map[string]enginesim.EngineInfo {
	t.Helper()
	_, b := httpDo(t, "GET", base+"/engines", "")
	var l struct{ Engines []enginesim.EngineInfo }
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("engines: %v: %.300s", err, b)
	}
	out := map[string]enginesim.EngineInfo{}
	for _, e := range l.Engines {
		out[e.Name] = e
	}
	return out
}

// metricSum sums the samples of metric name whose labels contain every
// one of labels, in Prometheus text.
func metricSum(text, name string, labels ...string) float64 {
	sum := 0.0
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if i := strings.LastIndexByte(line, ' '); ok && i > 0 {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err == nil {
				sum += v
			}
		}
	}
	return sum
}

// The done-when, on a running ilb dev: an engine added through
// the fleet file is simulated, weighed in the next snapshot and serves
// the traffic generator's requests; a broken file changes nothing; the
// engine removed through the file gets weight 0, drains and stops, and no
// request fails along the way.
func TestDevFleetFileAddsAndDrainsAnEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ilb dev for ~30 s")
	}
	fleetPath := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleetPath, schemas.ExampleFleetYAML(), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDev(t, "--fleet", fleetPath, "--window", "1s", "--time-scale", "20", "--drain-timeout", "4s", "--swing=false", "--rate", "30")
	defer d.stop(t)
	base := "http://" + strings.TrimPrefix(d.info.HTTP, "http://")
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(40 * time.Second); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 40 s; weights %v", what, devWeights(t, base))
			}
		}
	}
	metrics := func() string { _, m := httpDo(t, "GET", base+"/metrics", ""); return string(m) }
	const added = "east-h100-9"
	waitFor("east-h100-0 weighted", func() bool { return engineWeighted(devWeights(t, base), "east-h100-0") })
	if _, ok := devEngines(t, base)[added]; ok {
		t.Fatalf("%s simulated before it is in the fleet", added)
	}

	writeFleet(t, fleetPath, withEngine(added))
	waitFor(added+" weighted", func() bool { return engineWeighted(devWeights(t, base), added) })
	addedAt := time.Now()
	waitFor(added+" serving the traffic", func() bool { return devEngines(t, base)[added].Served >= 10 })
	t.Logf("%s: weighted, then 10 requests served in %v", added, time.Since(addedAt).Round(time.Millisecond))

	broken := strings.Replace(string(schemas.ExampleFleetYAML()), "max_batch:", "max_batchh:", 1)
	if err := os.WriteFile(fleetPath, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("the broken file's rejection counted", func() bool {
		return metricSum(metrics(), "ilb_fleetwatch_reloads_total", `result="rejected"`) >= 1
	})
	if _, b := httpDo(t, "GET", base+"/v1/dev/fleet", ""); strings.Count(string(b), `"`+added+`"`) != 2 {
		t.Fatalf("after a broken fleet file: %s", b)
	}
	before := devEngines(t, base)[added].Served
	waitFor(added+" still serving after the broken file", func() bool { return devEngines(t, base)[added].Served > before })

	servedAtRemoval := devEngines(t, base)[added].Served
	writeFleet(t, fleetPath, schemas.ExampleFleet())
	removedAt := time.Now()
	waitFor("a snapshot without "+added, func() bool { return !engineWeighted(devWeights(t, base), added) })
	t.Logf("%s: weight 0 after %v", added, time.Since(removedAt).Round(time.Millisecond))
	if e, ok := devEngines(t, base)[added]; ok && !e.Draining {
		t.Fatalf("%s removed from the fleet, not draining: %+v", added, e)
	}
	var last enginesim.EngineInfo
	waitFor(added+" drained and stopped", func() bool {
		e, ok := devEngines(t, base)[added]
		if ok {
			last = e
		}
		return !ok
	})
	t.Logf("%s: stopped %v after its removal; served %d (%d of them after the file changed: until the watcher's next poll, then ongoing conversations), failed %d, shed %d",
		added, time.Since(removedAt).Round(time.Millisecond), last.Served, last.Served-servedAtRemoval, last.Failed, last.Shed)
	if last.Failed+last.Shed != 0 {
		t.Fatalf("%s failed or shed requests: %+v", added, last)
	}
	m := metrics()
	if errs := metricSum(m, "ilb_traffic_requests_total", `result="error"`); errs != 0 {
		t.Fatalf("%v requests failed", errs)
	}
	t.Logf("traffic: %v ok, %v shed, 0 errors", metricSum(m, "ilb_traffic_requests_total", `result="ok"`),
		metricSum(m, "ilb_traffic_requests_total", `result="shed"`))
	if code, _ := httpDo(t, "POST", base+"/engines/"+added+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`); code != 404 {
		t.Fatalf("%s after its drain: %d, want 404", added, code)
	}

	// The admin endpoint simulates new engines too: like another one, or
	// described in the body; a misspelt field is refused.
	if code, b := httpDo(t, "POST", base+"/v1/dev/engines/west-x/add?like=west-a100-0", ""); code != 200 {
		t.Fatalf("add like: %d %s", code, b)
	}
	body := `{"region": "west-europe", "sku": "a100", "residency": "eu", "prefill_tokens_per_s": 3511,
		"decode_step_ms": {"base": 44.96, "per_seq": 0.441}, "max_batch": 16, "kv_cache_tokens": 200000}`
	if code, b := httpDo(t, "POST", base+"/v1/dev/engines/eu-x/add", body); code != 200 {
		t.Fatalf("add with a body: %d %s", code, b)
	}
	if code, b := httpDo(t, "POST", base+"/v1/dev/engines/eu-y/add", `{"region": "west-europe", "sku": "a100", "max_btch": 16}`); code != 400 ||
		!strings.Contains(string(b), "max_btch") {
		t.Fatalf("add with a misspelt field: %d %s", code, b)
	}
	waitFor("west-x and eu-x serving", func() bool {
		es := devEngines(t, base)
		return es["west-x"].Served > 0 && es["eu-x"].Served > 0
	})
	if code, b := httpDo(t, "POST", base+"/v1/dev/engines/eu-x/remove", ""); code != 200 {
		t.Fatalf("remove: %d %s", code, b)
	}
	waitFor("eu-x drained and stopped", func() bool { _, ok := devEngines(t, base)["eu-x"]; return !ok })

	// A file that changes the clusters is refused (ilb dev's data plane
	// and traffic serve the ones it started with).
	rejected := metricSum(metrics(), "ilb_fleetwatch_reloads_total", `result="rejected"`)
	more := withEngine(added)
	more.Clusters = slices.Clone(more.Clusters)
	more.Clusters[1].Name = "fe-west-2"
	writeFleet(t, fleetPath, more)
	waitFor("a fleet with other clusters refused", func() bool {
		return metricSum(metrics(), "ilb_fleetwatch_reloads_total", `result="rejected"`) > rejected
	})
	if !strings.Contains(d.stderr.String(), "the clusters differ") {
		t.Errorf("the refusal's reason not logged: %s", d.stderr.String())
	}
	if _, ok := devEngines(t, base)[added]; ok {
		t.Fatalf("%s simulated from a refused fleet", added)
	}
	if errs := metricSum(metrics(), "ilb_traffic_requests_total", `result="error"`); errs != 0 {
		t.Fatalf("%v requests failed", errs)
	}
}
