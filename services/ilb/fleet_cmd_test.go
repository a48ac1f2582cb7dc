package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// writeFleet writes f to path.
func writeFleet(t *testing.T, path string, f *schemas.Fleet) {
	t.Helper()
	b, err := schemas.EncodeFleet(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// withEngine is the example fleet plus a copy of east-h100-0 named name.
func withEngine(name string) *schemas.Fleet {
	f := schemas.ExampleFleet()
	e, _ := f.Engine("east-h100-0")
	e.Name, e.URL = name, ""
	f.Engines = append(slices.Clone(f.Engines), e)
	return f
}

// postStatus posts a short chat completion and returns the status.
func postStatus(t *testing.T, client *http.Client, url string) int {
	t.Helper()
	resp, err := client.Post(url, "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// ilb engine-sim --fleet: an engine added to the file serves, a broken
// file changes nothing, and an engine removed from it (by the file, read
// on SIGHUP) drains and then answers 404.
func TestEngineSimFleetReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	writeFleet(t, path, schemas.ExampleFleet())
	out := simBackground(t, "engine-sim", "--no-kafka", "--http", "127.0.0.1:0", "--fleet", path,
		"--time-scale", "20", "--drain-timeout", "300ms")
	addr := simWaitFor(t, out, regexp.MustCompile(`listening on (http://\S+)`))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	newURL := addr + "/engines/east-h100-9/v1/chat/completions"
	if code := postStatus(t, client, newURL); code != 404 {
		t.Fatalf("east-h100-9 before it is in the fleet: %d", code)
	}
	waitStatus := func(what string, want int) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); postStatus(t, client, newURL) != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no %d within 15 s", what, want)
			}
		}
	}
	writeFleet(t, path, withEngine("east-h100-9"))
	waitStatus("the added engine", 200)

	broken := strings.Replace(string(schemas.ExampleFleetYAML()), "max_batch:", "max_batchh:", 1)
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past a poll and the SIGHUP reload
	if code := postStatus(t, client, newURL); code != 200 {
		t.Fatalf("east-h100-9 after a broken fleet file: %d", code)
	}

	// Removed, read on SIGHUP (the poll would also see it): still served
	// while it drains, then 404.
	writeFleet(t, path, schemas.ExampleFleet())
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitStatus("the removed engine after its drain", 404)
	if code := postStatus(t, client, addr+"/engines/east-h100-0/v1/chat/completions"); code != 200 {
		t.Fatalf("east-h100-0: %d", code)
	}
}

// ilb adapter --fleet: the fleet's engines with a URL are scraped at
// URL/metrics; an engine given a URL in the file is scraped from then on,
// a broken file changes nothing, and an engine removed from the file is
// no longer scraped.
func TestAdapterFleetReload(t *testing.T) {
	addrs := streamstest.Kafka(t)
	body, err := os.ReadFile(filepath.Join("..", "adapter", "testdata", "vllm-v1-a.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var scrapesA, scrapesB atomic.Int64
	serve := func(n *atomic.Int64) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			n.Add(1)
			w.Write(body)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := serve(&scrapesA), serve(&scrapesB)
	f := schemas.ExampleFleet()
	f.Engines[0].URL = a.URL // east-h100-0
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	writeFleet(t, path, f)
	out := simBackground(t, "adapter", "--kafka", addrs[0], "--fleet", path, "--interval", "50ms", "--http", "127.0.0.1:0")
	metricsURL := simWaitFor(t, out, regexp.MustCompile(`adapter metrics on (http://\S+)`))
	if !strings.Contains(out.String(), "scraping east-h100-0 (vllm) every 50ms: "+a.URL+"/metrics") {
		t.Fatalf("output: %s", out.String())
	}
	waitGrow := func(what string, n *atomic.Int64) {
		t.Helper()
		from := n.Load()
		for deadline := time.Now().Add(15 * time.Second); n.Load() < from+3; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not scraped within 15 s", what)
			}
		}
	}
	waitGrow("east-h100-0", &scrapesA)
	if scrapesB.Load() != 0 {
		t.Fatal("east-h100-1 scraped before it has a URL")
	}

	f.Engines[1].URL = b.URL // east-h100-1
	writeFleet(t, path, f)
	waitGrow("east-h100-1 once the file gives it a URL", &scrapesB)

	broken := strings.Replace(string(schemas.ExampleFleetYAML()), "max_batch:", "max_batchh:", 1)
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if metricSum(string(m), "ilb_fleetwatch_reloads_total", `result="rejected"`) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the broken file's rejection not counted within 15 s")
		}
	}
	waitGrow("east-h100-0 after the broken file", &scrapesA)
	waitGrow("east-h100-1 after the broken file", &scrapesB)

	// east-h100-0 removed from the file: no longer scraped.
	f.Engines = f.Engines[1:]
	writeFleet(t, path, f)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		n := scrapesA.Load()
		time.Sleep(300 * time.Millisecond)
		if scrapesA.Load() == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("east-h100-0 still scraped 15 s after its removal")
		}
	}
	waitGrow("east-h100-1 after east-h100-0's removal", &scrapesB)
}
