package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
)

// devRun is `ilb dev` running on free ports.
type devRun struct {
	info   readyInfo
	stdout *syncBuffer
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

func startDev(t *testing.T, extra ...string) *devRun {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	args := append([]string{"dev", "--http", "127.0.0.1:0", "--kafka-listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0",
		"--ready-file", ready, "--progress", "2s"}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	d := &devRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() { d.done <- runMain(ctx, args, d.stdout, d.stderr) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil {
			if err := json.Unmarshal(b, &d.info); err != nil {
				t.Fatalf("ready file: %v", err)
			}
			return d
		}
		select {
		case code := <-d.done:
			t.Fatalf("ilb dev exited %d before ready; stderr:\n%s", code, d.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("ilb dev not ready in 30 s; stderr:\n%s", d.stderr.String())
		}
	}
}

// stop cancels and checks a clean, bounded exit.
func (d *devRun) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	select {
	case code := <-d.done:
		if code != 0 {
			t.Fatalf("ilb dev exited %d after Ctrl-C; stderr:\n%s", code, d.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ilb dev did not stop within 20 s of Ctrl-C")
	}
	if !strings.Contains(d.stderr.String(), "ilb dev: stopped") {
		t.Fatalf("no stop message; stderr:\n%s", d.stderr.String())
	}
}

func httpDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitState polls /api/state until ok says so.
func waitState(t *testing.T, base string, within time.Duration, what string, ok func(st map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, b := httpDo(t, "GET", base+"/api/state", "")
		var st map[string]any
		if code == 200 && json.Unmarshal(b, &st) == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; last state: %.600s", what, within, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestDevRunsTheLoop starts the whole local fleet as a user would (on free
// ports) and checks what DESIGN.md promises of it: the banner, the page
// and its state, the data plane API, a snapshot from the optimizer, the
// page rendered in a real browser, and a clean stop.
func TestDevRunsTheLoop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := startDev(t, "--time-scale", "4", "--rate", "6")
	defer http.DefaultClient.CloseIdleConnections()
	base := "http://" + d.info.HTTP
	out := d.stdout.String()
	for _, want := range []string{"ilb dev: local fleet up", "page      " + base + "/", "kcat -b " + d.info.Kafka + " -C -t ilb.signals",
		"nats --server " + d.info.NATS + " kv get ilb-weights fe-east", base + "/metrics", "6 in 3 regions (3× h100, 3× a100)",
		"fe-east demand ×3 from 1m0s to 3m0s, every 5m0s", "llama-2-70b (6 engines), llama-2-70b-code (3 engines)"} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	if code, b := httpDo(t, "GET", base+"/", ""); code != 200 || !bytes.Contains(b, []byte("/api/state")) {
		t.Fatalf("GET / = %d", code)
	}
	// A snapshot reaches the data plane of every cluster, and traffic flows.
	waitState(t, base, 40*time.Second, "snapshot on every cluster and answered traffic", func(st map[string]any) bool {
		for _, c := range st["clusters"].([]any) {
			r, _ := c.(map[string]any)["routing"].(map[string]any)
			if r == nil || r["ready"] != true || r["version"].(float64) < 1 {
				return false
			}
		}
		tr, _ := st["traffic"].(map[string]any)
		return tr != nil && tr["ok"].(float64) > 0
	})
	// The page judges the traffic against the SLO and compares the
	// optimizer's model with the engines' windows.
	waitState(t, base, 40*time.Second, "SLO attainment per cluster and a calibrated engine", func(st map[string]any) bool {
		judged := false
		for _, c := range st["clusters"].([]any) {
			slo, _ := c.(map[string]any)["slo"].(map[string]any)
			judged = judged || slo != nil && slo["outcomes"].(float64) > 0
		}
		calibrated := false
		for _, e := range st["engines"].([]any) {
			cal, _ := e.(map[string]any)["calibration"].(map[string]any)
			calibrated = calibrated || cal != nil && cal["windows"].(float64) > 0 && cal["capacity_rps"].(float64) > 0
		}
		return judged && calibrated
	})
	code, b := httpDo(t, "GET", base+"/v1/routing?cluster=fe-eu", "")
	if code != 200 || !bytes.Contains(b, []byte(`"cluster":"fe-eu"`)) {
		t.Fatalf("GET /v1/routing?cluster=fe-eu = %d %s", code, b)
	}
	code, b = httpDo(t, "POST", base+"/v1/pick", `{"cluster":"fe-eu","conversation_id":"c-1"}`)
	var pick struct {
		Engine  string `json:"engine"`
		Version uint64 `json:"snapshot_version"`
	}
	if code != 200 || json.Unmarshal(b, &pick) != nil || !strings.HasPrefix(pick.Engine, "eu-") || pick.Version == 0 {
		t.Fatalf("POST /v1/pick for fe-eu (residency eu) = %d %s, want an eu- engine and a version", code, b)
	}
	for _, path := range []string{"/healthz", "/metrics", "/v1/optimizer", "/v1/features", "/v1/profiles", "/engines"} {
		if code, b := httpDo(t, "GET", base+path, ""); code != 200 {
			t.Errorf("GET %s = %d %.200s", path, code, b)
		}
	}
	checkPageInChromium(t, base)
	d.stop(t)
}

var renderedWeight = regexp.MustCompile(`data-cluster="([^"]+)" data-engine="([^"]+)" data-weight="([0-9.]+)"`)

// checkPageInChromium loads the page in headless Chromium and checks the
// script drew each cluster's weights; it skips without Chromium.
func checkPageInChromium(t *testing.T, base string) {
	dom, ok := chromiumDOM(t, base+"/")
	if !ok {
		return
	}
	sums := map[string]float64{}
	for _, m := range renderedWeight.FindAllSubmatch(dom, -1) {
		w, _ := strconv.ParseFloat(string(m[3]), 64)
		sums[string(m[1])] += w
	}
	for _, c := range schemas.ExampleFleet().Clusters {
		// Weights plus the shed row sum to 1 (to the page's 4 decimals).
		if s := sums[c.Name]; s < 0.99 || s > 1.01 {
			t.Errorf("page shows weights of %s summing to %.4f, want 1", c.Name, s)
		}
	}
	if !bytes.Contains(dom, []byte(`data-engine-row="east-h100-0"`)) {
		t.Error("page lacks the engines table")
	}
}

func TestDevBadInputExits2(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	free := []string{"--kafka-listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "-1"}, "--rate"},
		{[]string{"--swing-schedule", "fe-east*2"}, "--swing-schedule"},
		{[]string{"--swing-schedule", "nope*2@1s-2s"}, `cluster "nope" is not in the fleet`},
		{[]string{"--fleet", "/no/such/fleet.yaml"}, "--fleet"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, "unexpected argument"},
		{append([]string{"--http", taken}, free...), "choose another port with --http"},
		{[]string{"--kafka-listen", taken, "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, "choose another port with --kafka-listen"},
		{[]string{"--nats-listen", taken, "--kafka-listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, "choose another port with --nats-listen"},
	}
	for _, c := range cases {
		code, _, errs := run(t, append([]string{"dev"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("ilb dev %v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

func TestDevPrintFleet(t *testing.T) {
	code, out, _ := run(t, "dev", "--print-fleet")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	f, err := schemas.ParseFleet([]byte(out))
	if err != nil || len(f.Engines) != len(schemas.ExampleFleet().Engines) {
		t.Fatalf("--print-fleet is not the example fleet: %v", err)
	}
}

func TestReachable(t *testing.T) {
	for in, want := range map[string]string{
		"[::]:8080": "127.0.0.1:8080", "0.0.0.0:80": "127.0.0.1:80", ":9": "127.0.0.1:9",
		"127.0.0.1:8080": "127.0.0.1:8080", "example.com:1": "example.com:1", "junk": "junk",
	} {
		if got := reachable(in); got != want {
			t.Errorf("reachable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDevRoutesByModel is issue 14's done-when over HTTP: `ilb dev` on its
// two-model example fleet (llama-2-70b everywhere, llama-2-70b-code on one
// engine per region) answers a request for each model from every cluster
// from an engine that serves it (X-Ilb-Engine), lists both models, and
// answers an unknown model 404 model_not_found in OpenAI's envelope.
func TestDevRoutesByModel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := startDev(t, "--time-scale", "4", "--rate", "2")
	defer http.DefaultClient.CloseIdleConnections()
	base := "http://" + d.info.HTTP
	fleet := schemas.ExampleFleet()
	waitState(t, base, 40*time.Second, "a snapshot on every cluster", func(st map[string]any) bool {
		for _, c := range st["clusters"].([]any) {
			r, _ := c.(map[string]any)["routing"].(map[string]any)
			if r == nil || r["ready"] != true {
				return false
			}
		}
		return true
	})
	models := fleet.Models()
	if len(models) != 2 {
		t.Fatalf("the example fleet serves %v, want two models", models)
	}
	code, b := httpDo(t, "GET", base+"/v1/models", "")
	if code != 200 || !bytes.Contains(b, []byte(`"id":"`+models[0]+`"`)) || !bytes.Contains(b, []byte(`"id":"`+models[1]+`"`)) {
		t.Fatalf("GET /v1/models = %d %s, want %v", code, b, models)
	}
	chat := func(cluster, model, conv string) (int, string, []byte) {
		body := `{"model":"` + model + `","max_tokens":4,"messages":[{"role":"user","content":"route me by model"}]}`
		req, err := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Ilb-Cluster", cluster)
		req.Header.Set("X-Conversation-Id", conv)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST chat for %s from %s: %v", model, cluster, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Ilb-Engine"), out
	}
	for _, c := range fleet.Clusters {
		for _, m := range models {
			for i := range 4 {
				conv := c.Name + "-" + m + "-" + strconv.Itoa(i)
				code, engine, out := chat(c.Name, m, conv)
				// Local admission counts the requests sent to an engine
				// since its last status and not ended as waiting: under
				// the dev traffic, a request to a model's one engine in a
				// region may be told to retry later, as a client would.
				for try := 0; code == http.StatusTooManyRequests && try < 40; try++ {
					time.Sleep(250 * time.Millisecond)
					code, engine, out = chat(c.Name, m, conv)
				}
				fe, ok := fleet.Engine(engine)
				if code != 200 || !ok || !fleet.ServesModel(fe, m) || !fleet.Eligible(c, fe) {
					t.Fatalf("%s from %s: %d from engine %q (%.300s), want 200 from an engine serving it that the cluster may use",
						m, c.Name, code, engine, out)
				}
			}
		}
	}
	checkModelWeightsInChromium(t, base, fleet)
	code, _, out := chat("fe-east", "gpt-nope", "unknown-model")
	var env struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if code != 404 || json.Unmarshal(out, &env) != nil || env.Error.Code != "model_not_found" || env.Error.Type != "invalid_request_error" {
		t.Fatalf("unknown model: %d %s, want 404 model_not_found", code, out)
	}
	d.stop(t)
}

var renderedModelWeight = regexp.MustCompile(`data-model-cluster="([^"]+)" data-model="([^"]+)" data-model-engine="([^"]+)" data-model-weight="([0-9.]+)"`)

// checkModelWeightsInChromium loads the page in headless Chromium and
// checks it shows each cluster's weights per model, each model's summing
// to 1 over engines that serve it; it skips without Chromium.
func checkModelWeightsInChromium(t *testing.T, base string, fleet *schemas.Fleet) {
	dom, ok := chromiumDOM(t, base+"/")
	if !ok {
		return
	}
	sums := map[string]float64{}
	for _, m := range renderedModelWeight.FindAllSubmatch(dom, -1) {
		cluster, model, engine := string(m[1]), string(m[2]), string(m[3])
		fe, ok := fleet.Engine(engine)
		if !ok || !fleet.ServesModel(fe, model) {
			t.Errorf("page shows %s of %s on %s, which does not serve it", model, cluster, engine)
		}
		w, _ := strconv.ParseFloat(string(m[4]), 64)
		sums[cluster+" "+model] += w
	}
	for _, c := range fleet.Clusters {
		for _, m := range fleet.Models() {
			// Shed is drawn apart; the example fleet sheds little.
			if s := sums[c.Name+" "+m]; s < 0.5 || s > 1.01 {
				t.Errorf("page shows weights of %s for %s summing to %.4f, want about 1", c.Name, m, s)
			}
		}
	}
}

// chromiumDOM loads url in headless Chromium and returns the DOM its
// scripts left; ok is false (logged) without Chromium, which CI installs.
func chromiumDOM(t *testing.T, url string) (dom []byte, ok bool) {
	t.Helper()
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Logf("skipping the browser check: no Chromium at %s (CI installs it)", chromium)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", url}
	dom, err := exec.CommandContext(ctx, chromium, args...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return dom, true
}
