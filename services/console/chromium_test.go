package console

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromiumPath is where CI installs Chromium.
const chromiumPath = "/usr/bin/chromium"

// headless runs Chromium on url with extra flags (--dump-dom or
// --screenshot=FILE) and returns its stdout.
func headless(t *testing.T, url string, extra ...string) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no Chromium at %s (CI installs it): %v", chromiumPath, err)
	}
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, extra...)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath, append(args, url)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", extra, err)
	}
	return string(out)
}

var weightRow = regexp.MustCompile(`data-cluster="([^"]+)" data-engine="([^"]+)" data-weight="([0-9.]+)"`)

// TestPageRendersInChromium loads the page in headless Chromium and checks
// that its script drew every cluster's current weights, the engines table
// and the charts from /api/state.
func TestPageRendersInChromium(t *testing.T) {
	c, f := played(t, 100, nil)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	dom := headless(t, srv.URL+"/", "--dump-dom")
	sums := map[string]float64{}
	for _, m := range weightRow.FindAllStringSubmatch(dom, -1) {
		w, _ := strconv.ParseFloat(m[3], 64)
		sums[m[1]] += w
	}
	for _, cl := range f.fleet.Clusters {
		want, shed := f.weights(cl.Name)
		total := shed
		for _, w := range want {
			total += round4(w)
		}
		if got := sums[cl.Name]; got < total-0.01 || got > total+0.01 {
			t.Errorf("cluster %s: rendered weights (and shed) sum to %.4f, want %.4f", cl.Name, got, total)
		}
	}
	for _, want := range []string{`data-engine-row="eu-a100-0"`, `data-snapshot-version="20"`, "<path", "demand ×2", "kcat -b"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	if dir := os.Getenv("ILB_SCREENSHOT_DIR"); dir != "" {
		headless(t, srv.URL+"/", "--screenshot="+filepath.Join(dir, "console.png"), "--window-size=1400,1300", "--hide-scrollbars")
	}
}
