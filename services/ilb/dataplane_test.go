package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// startDataplane runs `ilb dataplane args...` as a user would until the
// test ends, and returns its base URL.
func startDataplane(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb streamstest.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, append([]string{"dataplane", "--http", "127.0.0.1:0"}, args...), &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("ilb dataplane exited %d: %s", code, errb.String())
		}
		http.DefaultClient.CloseIdleConnections()
	})
	addr := regexp.MustCompile(`on (http://[0-9.:]+)`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("ilb dataplane exited %d before listening: %s", code, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("ilb dataplane did not print its address; stdout %q stderr %q", out.String(), errb.String())
	return ""
}

func writeSnapshot(t *testing.T, path string, version int, weights map[string]float64) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": version, "cluster": "fe-a",
		"created_at": "2026-11-29T22:00:00Z", "weights": weights, "shed_fraction": 0})
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// pickAll asks POST /v1/pick for conversations c-0..c-(n-1).
func pickAll(t *testing.T, base string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		body := fmt.Sprintf(`{"cluster":"fe-a","conversation_id":"c-%d"}`, i)
		resp, err := http.Post(base+"/v1/pick", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Engine string `json:"engine"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("pick c-%d: %d %v", i, resp.StatusCode, err)
		}
		out[i] = r.Engine
	}
	return out
}

func routingVersion(t *testing.T, base string) uint64 {
	t.Helper()
	resp, err := http.Get(base + "/v1/routing?cluster=fe-a")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Version uint64 `json:"version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Version
}

func shareOf(picks []string, engine string) float64 {
	n := 0
	for _, p := range picks {
		if p == engine {
			n++
		}
	}
	return float64(n) / float64(len(picks))
}

// TestDataplaneSnapshotFile tries `ilb dataplane --snapshot FILE` as a
// new user would: picks follow the file, an edit takes effect and moves
// about the minimum share of conversations (the total variation distance
// between the weight vectors), and two starts on one file pick alike.
func TestDataplaneSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "weights.json")
	v1 := map[string]float64{"eng-a": 0.5, "eng-b": 0.5}
	v2 := map[string]float64{"eng-a": 0.3, "eng-b": 0.5, "eng-c": 0.2}
	writeSnapshot(t, path, 1, v1)
	base := startDataplane(t, "--cluster", "fe-a", "--snapshot", path)
	const n = 2000
	before := pickAll(t, base, n)
	for name, w := range v1 {
		if got := shareOf(before, name); math.Abs(got-w) > 0.04 {
			t.Fatalf("%s got %.3f of the picks, weight %.2f", name, got, w)
		}
	}
	writeSnapshot(t, path, 2, v2)
	deadline := time.Now().Add(10 * time.Second)
	for routingVersion(t, base) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the edited file (version 2) was not picked up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := pickAll(t, base, n)
	moved := 0
	for i := range before {
		if before[i] != after[i] {
			moved++
			if before[i] != "eng-a" || after[i] != "eng-c" {
				t.Fatalf("c-%d moved %s -> %s: only eng-a's surplus should move", i, before[i], after[i])
			}
		}
	}
	// Total variation distance ½·Σ|Δw| = 0.2: the least that must move.
	if share := float64(moved) / n; math.Abs(share-0.2) > 0.03 {
		t.Fatalf("the edit moved %.3f of the conversations, want about 0.2", share)
	}
	t.Logf("weight shift with total variation 0.2 moved %.3f of %d conversations", float64(moved)/n, n)
	// Two fresh starts on the same file pick identically.
	first := pickAll(t, startDataplane(t, "--cluster", "fe-a", "--snapshot", path), n)
	second := pickAll(t, startDataplane(t, "--cluster", "fe-a", "--snapshot", path), n)
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("two starts on one file disagree on c-%d: %s vs %s", i, first[i], second[i])
		}
	}
	if math.Abs(shareOf(first, "eng-c")-0.2) > 0.04 {
		t.Fatalf("fresh start: eng-c has %.3f of the picks, weight 0.2", shareOf(first, "eng-c"))
	}
}

func TestDataplaneUsageErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.json")
	writeSnapshot(t, path, 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.4})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dataplane", "--snapshot", path}, "--cluster NAME is required"},
		{[]string{"dataplane", "--cluster", "fe-a"}, "give --snapshot FILE"},
		{[]string{"dataplane", "--cluster", "fe-a", "--snapshot", path, "--nats", "nats://127.0.0.1:1"}, "exclusive"},
		{[]string{"dataplane", "--cluster", "fe-a", "--snapshot", path, "--engine", "eng-a"}, "want NAME=URL"},
		{[]string{"dataplane", "--cluster", "fe-a", "--snapshot", path, "--http", "127.0.0.1:0"}, "weights sum to 0.9"},
		{[]string{"dataplane", "--cluster", "fe-a", "--snapshot", path + ".missing", "--http", "127.0.0.1:0"}, "no such file"},
		{[]string{"dataplane", "--cluster", "fe-a", "--snapshot", path, "--retry-body-bytes", "-1"}, "--retry-body-bytes -1: want a size in bytes"},
		{[]string{"dataplane", "--cluster", "fe-a", "--snapshot", path, "--retry-body-bytes", "64KiB"}, "-retry-body-bytes"},
	} {
		code, _, errs := run(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestDataplaneRetryBodyBytesFlag: --retry-body-bytes sets
// Config.RetryBodyBytes, 0 included (stream every header-routed body);
// without it the data plane's default applies.
func TestDataplaneRetryBodyBytesFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.json")
	writeSnapshot(t, path, 1, map[string]float64{"eng-a": 0.5, "eng-b": 0.5})
	e := &env{stdout: io.Discard, stderr: io.Discard}
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, dataplane.DefaultRetryBodyBytes},
		{[]string{"--retry-body-bytes", "4096"}, 4096},
		{[]string{"--retry-body-bytes", "0"}, 0},
	} {
		cfg, _, err := parseDataplane(e, append([]string{"--cluster", "fe-a", "--snapshot", path}, tc.args...))
		if err != nil || cfg.RetryBodyBytes != tc.want {
			t.Errorf("%v: RetryBodyBytes %d (%v), want %d", tc.args, cfg.RetryBodyBytes, err, tc.want)
		}
	}
}

// TestDataplaneLogsNATSConnection: ilb dataplane passes its logger to the
// NATS connection, so a server that refuses the credentials is logged
// (at Error, with the server's reason) besides ending the command with
// exit status 1; the password appears in neither.
func TestDataplaneLogsNATSConnection(t *testing.T) {
	const wrong = "ilb-dp-wrong-pw-Kd3"
	addr := streamstest.NATSWithUsers(t, streamstest.User{Name: "dataplane", Password: "right-pw"})
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(wrong), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb streamstest.LogBuffer // nats.go logs from its own goroutine
	code := runMain(ctx, []string{"dataplane", "--cluster", "fe-a", "--no-kafka", "--http", "127.0.0.1:0",
		"--nats", "nats://dataplane@" + addr, "--nats-password-file", pw}, &out, &errb)
	if ctx.Err() != nil || code != 1 {
		t.Fatalf("exit %d (deadline: %v); want 1 at once. stderr:\n%s", code, ctx.Err(), errb.String())
	}
	// The close is logged by nats.go's callback goroutine, which may run
	// just after the command saw the connection closed.
	errb.WaitFor(t, 5*time.Second, regexp.MustCompile(`level=ERROR msg="nats: connection closed by the server`))
	logs := errb.String()
	if !strings.Contains(strings.ToLower(logs), "authorization violation") || strings.Contains(logs, wrong) {
		t.Fatalf("stderr lacks the reason of the NATS connection's close (or shows the password):\n%s", logs)
	}
}

// TestOptimizerExitsOnRefusedNATSCredentials: `ilb optimizer` with a
// wrong NATS password exits 1 at once with the server's reason, instead
// of retrying the weights bucket forever, and prints no password.
func TestOptimizerExitsOnRefusedNATSCredentials(t *testing.T) {
	const wrong = "ilb-opt-wrong-pw-7Qz"
	addr := streamstest.NATSWithUsers(t, streamstest.User{Name: "optimizer", Password: "right-pw"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb streamstest.LogBuffer
	t.Setenv("ILB_NATS_PASSWORD", wrong)
	code := runMain(ctx, []string{"optimizer", "--fleet", aggFleetFile(t), "--kafka", "127.0.0.1:1",
		"--nats", "nats://optimizer@" + addr}, &out, &errb)
	logs := errb.String()
	if ctx.Err() != nil || code != 1 {
		t.Fatalf("exit %d (deadline: %v); want 1 at once. stderr:\n%s", code, ctx.Err(), logs)
	}
	if !strings.Contains(strings.ToLower(logs), "authorization violation") || strings.Contains(logs, wrong) {
		t.Fatalf("stderr lacks the server's reason (or shows the password):\n%s", logs)
	}
}
