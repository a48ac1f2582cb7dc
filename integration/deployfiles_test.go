package integration

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// These tests check the files under deploy/ against docker-compose.yml and
// against each other: the Dockerfile builds the right thing with the Go
// release go.mod asks for, Prometheus scrapes services that exist on the
// ports they listen on, the collector listens where the services send, and
// the Grafana dashboard only queries metrics deploy/METRICS.md promises.

func TestDockerfile(t *testing.T) {
	df := readFile(t, repoPath("deploy/Dockerfile"))
	goVersion := goModVersion(t)
	arg := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindStringSubmatch(df)
	if arg == nil {
		t.Fatal("deploy/Dockerfile: no ARG GO_VERSION=...")
	}
	if compareVersions(arg[1], goVersion) < 0 {
		t.Errorf("Dockerfile GO_VERSION %s is older than go.mod's go %s; golang images set GOTOOLCHAIN=local, so the build would fail", arg[1], goVersion)
	}
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 {
		t.Fatalf("deploy/Dockerfile: %d FROM lines, want a build stage and a runtime stage", len(froms))
	}
	if !strings.HasPrefix(froms[0][1], "golang:") {
		t.Errorf("build stage FROM %s, want golang:", froms[0][1])
	}
	if runtime := froms[len(froms)-1][1]; !strings.HasPrefix(runtime, "gcr.io/distroless/static") {
		t.Errorf("runtime stage FROM %s, want gcr.io/distroless/static*", runtime)
	}
	for _, want := range []string{
		"CGO_ENABLED=0", "-trimpath", "-o /ilb ./services/ilb",
		"USER nonroot", `ENTRYPOINT ["/ilb"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("deploy/Dockerfile lacks %q", want)
		}
	}
	if !strings.Contains(readFile(t, repoPath("services/ilb/main.go")), "package main") {
		t.Error("services/ilb is not a main package; the Dockerfile builds it")
	}
}

// goModVersion returns the `go` directive of go.mod.
func goModVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readFile(t, repoPath("go.mod")))
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	return m[1]
}

// compareVersions compares dotted numeric versions ("1.26" < "1.26.8").
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x = atoiOr(as[i], -1)
		}
		if i < len(bs) {
			y = atoiOr(bs[i], -1)
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

func atoiOr(s string, bad int) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return bad
		}
		n = n*10 + int(r-'0')
	}
	return n
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		sign int
	}{
		{"1.26.8", "1.26.8", 0}, {"1.26", "1.26.8", -1}, {"1.27", "1.26.8", 1},
		{"1.26.10", "1.26.9", 1}, {"1.26rc1", "1.26.0", -1},
	}
	for _, tt := range tests {
		got := compareVersions(tt.a, tt.b)
		if (got > 0) != (tt.sign > 0) || (got < 0) != (tt.sign < 0) {
			t.Errorf("compareVersions(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.sign)
		}
	}
}

// TestPrometheusTargets checks each scrape target names a compose service
// and the port that service listens on.
func TestPrometheusTargets(t *testing.T) {
	c := loadCompose(t)
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, repoPath("deploy/prometheus/prometheus.yml"), &cfg)
	ports := listenPorts(t, c)
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, err := net.SplitHostPort(target)
				if err != nil {
					t.Errorf("job %s: target %q: %v", sc.JobName, target, err)
					continue
				}
				if _, ok := c.Services[host]; !ok {
					t.Errorf("job %s: target %q names no compose service", sc.JobName, target)
				} else if !slices.Contains(ports[host], port) {
					t.Errorf("job %s: target %q, but %s listens on %v", sc.JobName, target, host, ports[host])
				}
				scraped[host] = true
			}
		}
	}
	for _, name := range ilbServices {
		if !scraped[name] {
			t.Errorf("prometheus.yml does not scrape %s", name)
		}
	}
	prom := c.service(t, "prometheus")
	file, _ := flagValue(commandOf(prom), "--config.file")
	if src, ok := hostPathOf(prom, file); !ok || src != "deploy/prometheus/prometheus.yml" {
		t.Errorf("prometheus --config.file=%s is mounted from %q, want deploy/prometheus/prometheus.yml", file, src)
	}
}

// listenPorts returns, per compose service, the container ports it listens
// on that these tests know: an ilb service's --http port, the collector's
// Prometheus exporter, Prometheus itself.
func listenPorts(t *testing.T, c compose) map[string][]string {
	out := map[string][]string{"prometheus": {"9090"}}
	for _, name := range ilbServices {
		addr, _ := flagValue(commandOf(c.service(t, name)), "--http")
		_, port, _ := strings.Cut(addr, ":")
		out[name] = []string{port}
	}
	for _, endpoint := range collectorEndpoints(t) {
		_, port, _ := net.SplitHostPort(endpoint)
		out["otel-collector"] = append(out["otel-collector"], port)
	}
	return out
}

// collectorConfig is the part of the collector config these tests read.
type collectorConfig struct {
	Receivers struct {
		OTLP struct {
			Protocols map[string]struct {
				Endpoint string `yaml:"endpoint"`
			} `yaml:"protocols"`
		} `yaml:"otlp"`
	} `yaml:"receivers"`
	Exporters map[string]map[string]any `yaml:"exporters"`
	Service   struct {
		Pipelines map[string]struct {
			Receivers  []string `yaml:"receivers"`
			Processors []string `yaml:"processors"`
			Exporters  []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

// collectorEndpoints returns the collector's listen addresses by role:
// "otlp-grpc", "otlp-http", "prometheus".
func collectorEndpoints(t *testing.T) map[string]string {
	var cfg collectorConfig
	readYAML(t, repoPath("deploy/otel/collector.yaml"), &cfg)
	return map[string]string{
		"otlp-grpc":  cfg.Receivers.OTLP.Protocols["grpc"].Endpoint,
		"otlp-http":  cfg.Receivers.OTLP.Protocols["http"].Endpoint,
		"prometheus": asString(cfg.Exporters["prometheus"]["endpoint"]),
	}
}

func TestCollectorConfig(t *testing.T) {
	var cfg collectorConfig
	readYAML(t, repoPath("deploy/otel/collector.yaml"), &cfg)
	for _, p := range []string{"traces", "metrics"} {
		pl, ok := cfg.Service.Pipelines[p]
		if !ok || !slices.Contains(pl.Receivers, "otlp") || !slices.Contains(pl.Processors, "batch") {
			t.Errorf("collector: pipeline %q = %+v, want otlp receiver and batch processor", p, pl)
		}
		for _, e := range pl.Exporters {
			if _, ok := cfg.Exporters[e]; !ok {
				t.Errorf("collector: pipeline %q uses undefined exporter %q", p, e)
			}
		}
	}
	if !slices.Contains(cfg.Service.Pipelines["metrics"].Exporters, "prometheus") {
		t.Error("collector: metrics pipeline does not export to prometheus")
	}
	// The services send OTLP/HTTP to the port the receiver listens on.
	_, httpPort, err := net.SplitHostPort(collectorEndpoints(t)["otlp-http"])
	if err != nil {
		t.Fatalf("collector otlp http endpoint: %v", err)
	}
	c := loadCompose(t)
	for _, name := range ilbServices {
		if ep := envOf(c.service(t, name))["OTEL_EXPORTER_OTLP_ENDPOINT"]; ep != "http://otel-collector:"+httpPort {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q, want http://otel-collector:%s", name, ep, httpPort)
		}
	}
	svc := c.service(t, "otel-collector")
	file, _ := flagValue(commandOf(svc), "--config")
	if src, ok := hostPathOf(svc, file); !ok || src != "deploy/otel/collector.yaml" {
		t.Errorf("otel-collector --config=%s is mounted from %q, want deploy/otel/collector.yaml", file, src)
	}
}

// TestDockerignoreKeepsBuildInputs checks .dockerignore does not exclude
// what `go build ./services/ilb` reads.
func TestDockerignoreKeepsBuildInputs(t *testing.T) {
	sc := bufio.NewScanner(bytes.NewReader([]byte(readFile(t, repoPath(".dockerignore")))))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, needed := range []string{"go.mod", "go.sum", "services", "schemas", "streams", "solver", "*", "**"} {
			if strings.TrimSuffix(strings.TrimPrefix(line, "/"), "/") == needed {
				t.Errorf(".dockerignore excludes %q, which the build needs", line)
			}
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
