package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
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
