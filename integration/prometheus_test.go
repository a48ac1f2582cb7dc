package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/ilb-router/ilb/schemas"
)

// The real Prometheus against running ilb services: Debian's
// `prometheus` (.ci/run installs it) runs with deploy/prometheus's
// config, its targets rewritten to the ilb processes on loopback, and
// must find a series for every expression of the shipped Grafana
// dashboard and of every alert rule (a misspelled metric fails here).

// lookPrometheusTool finds a Prometheus binary (prometheus, promtool).
// Outside CI (CI unset) the test skips without it; in CI it fails,
// since .ci/run installs it.
func lookPrometheusTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found, and CI is set: .ci/run installs Debian's prometheus package", name)
	}
	t.Skipf("%s not installed (apt-get install prometheus); CI installs it", name)
	return ""
}

// TestPromtoolChecksShippedFiles runs `promtool check rules` on the
// alert rules and `promtool check config` on the shipped config.
func TestPromtoolChecksShippedFiles(t *testing.T) {
	promtool := lookPrometheusTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", repoPath("deploy/prometheus/alerts.yml")},
		{"check", "config", "--syntax-only", repoPath("deploy/prometheus/prometheus.yml")},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertRules reads deploy/prometheus/alerts.yml.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, repoPath("deploy/prometheus/alerts.yml"), &f)
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	if len(out) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return out
}

// threshold splits an alert expression's final comparison with a
// number off: what is left is the signal, which must have a series even
// when the alert does not fire.
var threshold = regexp.MustCompile(`(?s)^(.*\S)\s*(==|!=|>=|<=|>|<)\s*-?[0-9.]+(e[+-]?[0-9]+)?\s*$`)

// dashboardExprs returns the Grafana dashboard's queries with its
// variables bound as Grafana would for "All" clusters and a 1 s scrape
// interval ($__rate_interval is at least four scrape intervals).
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	var dash struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readFile(t, repoPath("deploy/grafana/dashboards/ilb.json"))), &dash); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("$cluster", ".*", "$__rate_interval", "5s")
	var out []string
	for _, p := range flattenPanels(dash.Panels) {
		for _, tg := range p.Targets {
			if tg.Expr != "" {
				out = append(out, r.Replace(tg.Expr))
			}
		}
	}
	return out
}

// promConfig turns the shipped prometheus.yml into one for this test:
// 1 s scrape and evaluation, each ilb job's targets replaced by the
// running processes' addresses, and the prometheus job by itself. Jobs
// of things that do not run here (the OTel collector) are dropped; an
// ilb job the test does not know fails it, so a new service gets wired
// in here too.
func promConfig(t *testing.T, targets map[string][]string) []byte {
	t.Helper()
	var cfg map[string]any
	readYAML(t, repoPath("deploy/prometheus/prometheus.yml"), &cfg)
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"}
	var jobs []any
	for _, j := range cfg["scrape_configs"].([]any) {
		job := j.(map[string]any)
		name := job["job_name"].(string)
		addrs, ok := targets[name]
		switch {
		case ok:
			job["static_configs"] = []any{map[string]any{"targets": addrs}}
			jobs = append(jobs, job)
		case strings.HasPrefix(name, "ilb-"):
			t.Fatalf("prometheus.yml job %s: the test runs no such service; wire it in", name)
		default:
			t.Logf("prometheus.yml job %s: not running here, dropped", name)
		}
	}
	cfg["scrape_configs"] = jobs
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// promAPI queries a Prometheus HTTP API.
type promAPI struct {
	base string
	c    *http.Client
}

// get decodes the data of a successful API answer into out.
func (p promAPI) get(path string, q url.Values, out any) error {
	resp, err := p.c.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// series returns the number of series an instant query returns.
func (p promAPI) series(expr string) (int, error) {
	var d struct {
		Result []json.RawMessage `json:"result"`
	}
	err := p.get("/api/v1/query", url.Values{"query": {expr}}, &d)
	return len(d.Result), err
}

// prometheusScrape is the run described at the top of the file. The
// processes: brokers, engine-sim, aggregator, optimizer, a data plane of
// fe-a on NATS and one of fe-b on a static snapshot that sheds half its
// requests (so the shed alert has something to see). Malformed signal
// records go to Kafka (the DLQ alert), chat completions go through both
// data planes (picks, completions, TTFT windows).
func prometheusScrape(t *testing.T, bin string) {
	promBin := lookPrometheusTool(t, "prometheus")
	start := time.Now()
	dir := t.TempDir()
	brokers := startProc(t, bin, "brokers", "brokers", "--kafka-listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	kafkaAddr := brokers.waitMatch(t, `kafka: (\S+)`)[1]
	natsURL := brokers.waitMatch(t, `nats: (\S+)`)[1]
	brokers.waitMatch(t, `ready;`)
	fleet := filepath.Join(dir, "fleet.yaml")
	head := strings.Replace(smallFleetHead, "  - {name: fe-a, region: r, demand_share: 1}",
		"  - {name: fe-a, region: r, demand_share: 0.8}\n  - {name: fe-b, region: r, demand_share: 0.2}", 1)
	writeFile(t, fleet, head+smallEngines)
	sim := startProc(t, bin, "engine-sim", "engine-sim", "--kafka", kafkaAddr, "--fleet", fleet, "--http", "127.0.0.1:0",
		"--time-scale", "10", "--status-interval", "200ms")
	simAddr := sim.waitMatch(t, `listening on http://(\S+)`)[1]
	withURLs := filepath.Join(dir, "fleet-urls.yaml")
	writeFile(t, withURLs, strings.Replace(smallFleetWithURLs(simAddr), smallFleetHead, head, 1))
	agg := startProc(t, bin, "aggregator", "aggregator", "--kafka", kafkaAddr, "--fleet", fleet, "--window", "1s",
		"--http", "127.0.0.1:0", "--log-level", "warn")
	aggAddr := agg.waitMatch(t, `features on http://([^/\s]+)`)[1]
	opt := startProc(t, bin, "optimizer", "optimizer", "--kafka", kafkaAddr, "--nats", natsURL, "--fleet", fleet,
		"--min-interval", "200ms", "--max-interval", "1s", "--http", "127.0.0.1:0")
	optAddr := opt.waitMatch(t, `state on http://([^/\s]+)`)[1]
	dpA := startProc(t, bin, "dataplane-a", "dataplane", "--cluster", "fe-a", "--kafka", kafkaAddr, "--nats", natsURL,
		"--fleet", withURLs, "--http", "127.0.0.1:0")
	dpAURL := "http://" + dpA.waitMatch(t, `on http://(\S+) \(weights`)[1]
	snap := filepath.Join(dir, "fe-b.json")
	writeFile(t, snap, fmt.Sprintf(`{"version": 1, "cluster": "fe-b", "created_at": %q, "weights": {"e-0": 0.25, "e-1": 0.25}, "shed_fraction": 0.5}`,
		time.Now().UTC().Format(time.RFC3339)))
	dpB := startProc(t, bin, "dataplane-b", "dataplane", "--cluster", "fe-b", "--snapshot", snap, "--fleet", withURLs,
		"--http", "127.0.0.1:0")
	dpBURL := "http://" + dpB.waitMatch(t, `on http://(\S+) \(weights`)[1]

	promAddr := freeAddr(t)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfgPath, string(promConfig(t, map[string][]string{
		"ilb-engine-sim": {simAddr}, "ilb-aggregator": {aggAddr}, "ilb-optimizer": {optAddr},
		"ilb-dataplane": {strings.TrimPrefix(dpAURL, "http://"), strings.TrimPrefix(dpBURL, "http://")},
		"prometheus":    {promAddr},
	})))
	writeFile(t, filepath.Join(dir, "alerts.yml"), readFile(t, repoPath("deploy/prometheus/alerts.yml")))
	startProc(t, promBin, "prometheus", "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")

	c := httpClient(t, 5*time.Second)
	waitUntil(t, 30*time.Second, "the first snapshot at the fe-a data plane", func() bool { return routingOK(c, dpAURL) })
	stopMalformed := sendMalformedSignals(t, kafkaAddr)
	defer stopMalformed()
	stopTraffic := driveChats(c, map[string]string{"fe-a": dpAURL, "fe-b": dpBURL})
	defer stopTraffic()

	api := promAPI{base: "http://" + promAddr, c: c}
	checkTargetsUp(t, api)
	exprs := map[string]string{}
	for i, e := range dashboardExprs(t) {
		exprs[fmt.Sprintf("dashboard query %d", i+1)] = e
	}
	rules := alertRules(t)
	for name, e := range rules {
		m := threshold.FindStringSubmatch(e)
		if m == nil {
			t.Fatalf("alert %s: expression %q does not end in a comparison with a number", name, e)
		}
		exprs["alert "+name+" (without its threshold)"] = m[1]
	}
	missing := waitSeries(t, api, exprs, 40*time.Second)
	for _, name := range sortedKeys(missing) {
		t.Errorf("%s returns no series: %s", name, missing[name])
	}
	checkRulesHealthy(t, api, len(rules))
	checkAlertOutcomes(t, api, rules)
	t.Logf("real Prometheus: %d dashboard queries and %d alert rules each returned a series; %v in all",
		len(exprs)-len(rules), len(rules), time.Since(start).Round(100*time.Millisecond))
}

// sendMalformedSignals writes an undecodable record to ilb.signals every
// 500 ms until stopped: increase() sees nothing of a counter's first
// sample, so the DLQ alert needs the counter to grow while scraped.
func sendMalformedSignals(t *testing.T, kafkaAddr string) func() {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cl.Close()
		for ctx.Err() == nil {
			rec := &kgo.Record{Topic: schemas.TopicSignals, Key: []byte("e-0"), Value: []byte("\xff\xffnot a signal"),
				Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.SchemaSignalV1)}}}
			_ = cl.ProduceSync(ctx, rec).FirstErr()
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// driveChats sends chat completions through both data planes until
// stopped (a new conversation every time, so fe-b's shed fraction
// applies to half of them).
func driveChats(c *http.Client, urls map[string]string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			for cluster, u := range urls {
				_, _ = chatInBody(ctx, c, u, cluster, fmt.Sprintf("conv-%d", i), 4)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// checkTargetsUp waits until Prometheus has scraped every target
// successfully.
func checkTargetsUp(t *testing.T, api promAPI) {
	t.Helper()
	var last string
	ok := waitFor(30*time.Second, func() bool {
		var d struct {
			Active []struct {
				Job       string `json:"scrapePool"`
				URL       string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := api.get("/api/v1/targets", url.Values{"state": {"active"}}, &d); err != nil || len(d.Active) == 0 {
			last = fmt.Sprint(err)
			return false
		}
		for _, tg := range d.Active {
			if tg.Health != "up" {
				last = fmt.Sprintf("%s %s: %s %s", tg.Job, tg.URL, tg.Health, tg.LastError)
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("Prometheus targets not all up within 30 s: %s", last)
	}
}

// waitSeries polls until every expression returns a series, and returns
// the ones that still do not (with the reason) at the deadline.
func waitSeries(t *testing.T, api promAPI, exprs map[string]string, d time.Duration) map[string]string {
	t.Helper()
	missing := map[string]string{}
	waitFor(d, func() bool {
		clear(missing)
		for name, e := range exprs {
			n, err := api.series(e)
			switch {
			case err != nil:
				missing[name] = fmt.Sprintf("%s (error: %v)", e, err)
			case n == 0:
				missing[name] = e
			}
		}
		return len(missing) == 0
	})
	return missing
}

// checkRulesHealthy checks that Prometheus loaded every rule and
// evaluates it without error.
func checkRulesHealthy(t *testing.T, api promAPI, want int) {
	t.Helper()
	var bad []string
	ok := waitFor(10*time.Second, func() bool {
		var d struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := api.get("/api/v1/rules", url.Values{"type": {"alert"}}, &d); err != nil {
			bad = []string{err.Error()}
			return false
		}
		bad = nil
		n := 0
		for _, g := range d.Groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" {
					bad = append(bad, fmt.Sprintf("%s: %s %s", r.Name, r.Health, r.LastError))
				}
			}
		}
		if n != want {
			bad = append(bad, fmt.Sprintf("%d rules loaded, want %d", n, want))
		}
		return len(bad) == 0
	})
	if !ok {
		t.Errorf("alert rules not all healthy: %v", bad)
	}
}

// checkAlertOutcomes evaluates the full alert expressions: the run sent
// a malformed signal and sheds half of fe-b, so those two conditions
// hold; nothing else is wrong, so the others must not. A condition that
// must hold gets up to 20 s: waitSeries may have seen its expression's
// series for another cluster (fe-a's shed ratio, 0) before fe-b's shed
// counter had the two scrapes rate() needs.
func checkAlertOutcomes(t *testing.T, api promAPI, rules map[string]string) {
	t.Helper()
	firing := map[string]bool{"IlbSignalsDeadLettered": true, "IlbShedAboveThreshold": true}
	for _, name := range sortedKeys(rules) {
		var n int
		var err error
		waitFor(20*time.Second, func() bool {
			n, err = api.series(rules[name])
			return err == nil && (n > 0 || !firing[name])
		})
		if err != nil {
			t.Errorf("alert %s: %v", name, err)
			continue
		}
		if (n > 0) != firing[name] {
			t.Errorf("alert %s: condition holds for %d series, want holding %v", name, n, firing[name])
		}
	}
}
