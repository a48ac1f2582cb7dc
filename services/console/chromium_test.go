package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	checkGoodputRendered(t, c, dom)
	checkCalibrationRendered(t, dom)
	if dir := os.Getenv("ILB_SCREENSHOT_DIR"); dir != "" {
		headless(t, srv.URL+"/", "--screenshot="+filepath.Join(dir, "console.png"), "--window-size=1400,2100", "--hide-scrollbars")
	}
}

var sloRow = regexp.MustCompile(`data-slo-cluster="([^"]+)" data-attainment-1m="([0-9.]*)" data-attainment="([0-9.]*)" data-shed-snapshot-rps="([0-9.]+)" data-shed-admission-rps="([0-9.]+)"`)

// checkGoodputRendered: every cluster card shows the SLO attainment its
// state has, and the refusals by reason (the fake's 3/s and 1/s); the
// charts of attainment and shed are drawn.
func checkGoodputRendered(t *testing.T, c *Console, dom string) {
	t.Helper()
	st, err := c.State()
	if err != nil {
		t.Fatal(err)
	}
	rows := sloRow.FindAllStringSubmatch(dom, -1)
	if len(rows) != len(st.Clusters) {
		t.Fatalf("%d goodput rows rendered, want one per cluster (%d)", len(rows), len(st.Clusters))
	}
	for i, m := range rows {
		v := st.Clusters[i].SLO
		if m[1] != st.Clusters[i].Name || v == nil {
			t.Fatalf("goodput row %d is %q, want %s with an SLO view", i, m[1], st.Clusters[i].Name)
		}
		att1, _ := strconv.ParseFloat(m[2], 64)
		att, _ := strconv.ParseFloat(m[3], 64)
		snap, _ := strconv.ParseFloat(m[4], 64)
		adm, _ := strconv.ParseFloat(m[5], 64)
		if att1 != v.Attainment1m || att != v.Attainment || snap != 3 || adm != 1 {
			t.Errorf("%s: rendered attainment %v (1 min) and %v, shed %v + %v/s; want %v, %v, 3 and 1", m[1], att1, att, snap, adm, v.Attainment1m, v.Attainment)
		}
	}
	for _, want := range []string{`id="attainment"><svg`, `id="shedchart"><svg`, "refused by local admission</title>", "within SLO, last minute</title>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
}

var calRow = regexp.MustCompile(`data-calibration-row="[a-z]`) // not the script's own text

var calCell = regexp.MustCompile(`<td class="num( off)?" data-cal="(load|ttft|tbot)" data-err="(-?[0-9.]*)">`)

// checkCalibrationRendered: one calibration row per engine, with the
// errors the fake gives (east-h100-0 planned at twice its load: off).
func checkCalibrationRendered(t *testing.T, dom string) {
	t.Helper()
	if n := len(calRow.FindAllString(dom, -1)); n != 6 {
		t.Fatalf("%d calibration rows, want 6", n)
	}
	row := dom[strings.Index(dom, `data-calibration-row="east-h100-0"`):]
	row = row[:strings.Index(row, "</tr>")]
	cells := calCell.FindAllStringSubmatch(row, -1)
	if len(cells) != 3 {
		t.Fatalf("east-h100-0 calibration row has %d error cells: %s", len(cells), row)
	}
	for _, m := range cells {
		off, name, e := m[1] != "", m[2], m[3]
		want := name == "load"
		if off != want || e == "" {
			t.Errorf("east-h100-0 %s: off %v (error %q), want off %v with an error", name, off, e, want)
		}
	}
}

var removeButton = regexp.MustCompile(`data-remove-engine="[a-z]`) // not the script's own text

// TestPageMembersControls: with a members API the page has a remove
// button per engine and an add form; clicking them (a script added to
// the page for the test) posts to the API, and the page shows its answer.
func TestPageMembersControls(t *testing.T) {
	c, _ := played(t, 10, func(cfg *Config) { cfg.MembersURL = "/v1/dev/engines" })
	var mu sync.Mutex
	var posts []string
	clicks := `<script>setTimeout(() => {
  document.querySelector('[data-remove-engine="eu-a100-0"]').click();
  $("addname").value = "east-h100-9";
  $("addlike").value = "east-h100-1";
  setTimeout(() => $("addbtn").click(), 300);
}, 1500);</script></body>`
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(strings.Replace(string(page), "</body>", clicks, 1)))
	})
	mux.Handle("GET /api/state", c.Handler())
	mux.HandleFunc("POST /v1/dev/engines/{name}/{op}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts = append(posts, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"engines": ["east-h100-0", "east-h100-9"], "simulated": []}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dom := headless(t, srv.URL+"/", "--dump-dom")
	if !strings.Contains(dom, `data-remove-engine="eu-a100-0"`) || !strings.Contains(dom, `<option value="east-h100-1">`) {
		t.Fatalf("no remove buttons or like choices rendered")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/v1/dev/engines/eu-a100-0/remove", "/v1/dev/engines/east-h100-9/add?like=east-h100-1"}
	if !slices.Equal(posts, want) {
		t.Fatalf("posts %v, want %v", posts, want)
	}
	if !strings.Contains(dom, "add east-h100-9: engines east-h100-0, east-h100-9") {
		t.Errorf("the API's answer not shown")
	}

	// Without a members API: no controls.
	c2, _ := played(t, 2, nil)
	srv2 := httptest.NewServer(c2.Handler())
	defer srv2.Close()
	if dom := headless(t, srv2.URL+"/", "--dump-dom"); removeButton.MatchString(dom) || !strings.Contains(dom, `<div id="members" hidden=""`) {
		t.Errorf("members controls shown without a members API")
	}
}
