package backtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestWriteReport(t *testing.T) {
	res := run(t, parseFleet(t, twoRegionFleet), synthetic(60, 3, 200*time.Millisecond, 20), func(c *Config) {
		c.Policies = []string{PolicyRoundRobin, PolicyHash, PolicyPID, PolicyOptimizer}
	})
	dir := filepath.Join(t.TempDir(), "report")
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	// The goodput bars and shed over time, two CDFs, the cache chart,
	// load for 4 policies, weights for 2.
	if n := strings.Count(html, "<svg"); n != 2+2+1+4+2 {
		t.Errorf("%d charts, want 11", n)
	}
	if g, tbl := strings.Index(html, "Goodput"), strings.Index(html, "<table>"); g < 0 || g > tbl {
		t.Error("the report does not lead with goodput")
	}
	for _, p := range res.Policies {
		if !strings.Contains(html, fmt.Sprintf("%.2f%% · %.3f rps", 100*p.SLOAttainment, p.GoodputRPS)) {
			t.Errorf("goodput bar of %s lacks its attainment and goodput", p.Policy)
		}
	}
	for _, p := range res.Policies {
		if !strings.Contains(html, "<td>"+p.Policy+"</td>") || !strings.Contains(html, "<h3>"+p.Policy+"</h3>") {
			t.Errorf("report lacks %s", p.Policy)
		}
	}
	// Readable without a server: no script, nothing fetched.
	if strings.Contains(html, "<script") || regexp.MustCompile(`(src|href)=`).MatchString(html) {
		t.Error("report loads something")
	}
	if strings.Contains(html, "NaN") || strings.Contains(html, "Inf") {
		t.Error("report has NaN or Inf coordinates")
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		log    bool
		want   string
	}{
		{0, 1, false, "[0 0.2 0.4 0.6000000000000001 0.8 1]"},
		{0, 1300, false, "[0 200 400 600 800 1000 1200]"},
		{7, 20000, true, "[10 100 1000 10000]"},
	} {
		if got := fmt.Sprint(ticks(tc.lo, tc.hi, tc.log)); got != tc.want {
			t.Errorf("ticks(%v, %v, %v) = %s, want %s", tc.lo, tc.hi, tc.log, got, tc.want)
		}
	}
}
