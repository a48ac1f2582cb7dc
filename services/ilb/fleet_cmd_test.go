package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
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
