package integration

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The Grafana dashboard and its provisioning: every panel queries the
// provisioned data source, only metrics deploy/METRICS.md promises, and
// the files land where Grafana looks for them.

// grafanaPanel is the part of a dashboard panel these tests read.
type grafanaPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels  []grafanaPanel           `json:"panels"` // collapsed rows hold their panels
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
}

// overlaps reports whether two panels' grid rectangles intersect.
func (p grafanaPanel) overlaps(q grafanaPanel) bool {
	a, b := p.GridPos, q.GridPos
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

func TestGrafanaDashboard(t *testing.T) {
	var dash struct {
		UID    string         `json:"uid"`
		Panels []grafanaPanel `json:"panels"`
	}
	data := []byte(readFile(t, repoPath("deploy/grafana/dashboards/ilb.json")))
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("ilb.json: %v", err)
	}
	dsUID := grafanaDatasourceUID(t)
	ids := map[int]string{}
	var exprs []string
	for _, p := range flattenPanels(dash.Panels) {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if uid := asString(p.Datasource["uid"]); uid != dsUID {
			t.Errorf("panel %q: datasource uid %q, want the provisioned %q", p.Title, uid, dsUID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has a target with no expr", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for i, p := range dash.Panels {
		for _, q := range dash.Panels[i+1:] {
			if p.overlaps(q) {
				t.Errorf("panels %q and %q overlap on the grid", p.Title, q.Title)
			}
		}
	}
	if len(exprs) < 10 {
		t.Errorf("dashboard has %d queries; expected the full set of panels", len(exprs))
	}
	checkMetricsDocumented(t, exprs)
}

func flattenPanels(ps []grafanaPanel) []grafanaPanel {
	var out []grafanaPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flattenPanels(p.Panels)...)
	}
	return out
}

// checkMetricsDocumented fails for each ilb_ metric a query uses that
// deploy/METRICS.md does not list.
func checkMetricsDocumented(t *testing.T, exprs []string) {
	t.Helper()
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(ilb_[a-z0-9_]+)` \\|").FindAllStringSubmatch(readFile(t, repoPath("deploy/METRICS.md")), -1) {
		documented[m[1]] = true
	}
	if len(documented) == 0 {
		t.Fatal("deploy/METRICS.md lists no metrics")
	}
	name := regexp.MustCompile(`\bilb_[a-z0-9_]+`)
	for _, e := range exprs {
		for _, m := range name.FindAllString(e, -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(m, suffix); ok && documented[b] {
					base = b
				}
			}
			if !documented[base] {
				t.Errorf("dashboard query uses %s, which deploy/METRICS.md does not list: %s", m, e)
			}
		}
	}
}

func grafanaDatasourceUID(t *testing.T) string {
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, repoPath("deploy/grafana/provisioning/datasources/prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("grafana datasources = %+v, want one prometheus data source", ds.Datasources)
	}
	if ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana datasource url %q, want http://prometheus:9090", ds.Datasources[0].URL)
	}
	return ds.Datasources[0].UID
}

// TestGrafanaProvisioning checks the dashboard provider reads the folder
// compose mounts the dashboards into, and the home dashboard exists.
func TestGrafanaProvisioning(t *testing.T) {
	var prov struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, repoPath("deploy/grafana/provisioning/dashboards/ilb.yaml"), &prov)
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers = %+v, want one file provider", prov.Providers)
	}
	grafana := loadCompose(t).service(t, "grafana")
	if src, ok := hostPathOf(grafana, prov.Providers[0].Options.Path); !ok || src != "deploy/grafana/dashboards" {
		t.Errorf("provider path %s is mounted from %q, want deploy/grafana/dashboards", prov.Providers[0].Options.Path, src)
	}
	if src, ok := hostPathOf(grafana, "/etc/grafana/provisioning/dashboards/ilb.yaml"); !ok || src != "deploy/grafana/provisioning/dashboards/ilb.yaml" {
		t.Errorf("provisioning is mounted from %q, want deploy/grafana/provisioning", src)
	}
	home := envOf(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	src, ok := hostPathOf(grafana, home)
	if !ok {
		t.Fatalf("home dashboard %q is not inside a mounted folder", home)
	}
	if _, err := os.Stat(repoPath(src)); err != nil {
		t.Errorf("home dashboard: %v", err)
	}
}
