package integration

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ilb-router/ilb/schemas"
)

// These tests read docker-compose.yml the way the compose specification
// defines it, into generic maps, and check what a reviewer would otherwise
// check by eye: the services exist, Kafka runs in KRaft mode, NATS is a
// release without the known JetStream data-loss bugs, nothing listens
// beyond loopback, every ilb service is built from deploy/Dockerfile, waits
// for healthy brokers and has a health check on its own port, and every
// file mounted into a container exists. No container engine is needed.

// ilbServices are the services that run the ilb binary; each must exist.
var ilbServices = []string{
	"engine-sim", "aggregator", "optimizer",
	"dataplane-east", "dataplane-west", "dataplane-eu",
}

// requiredServices are every service docker-compose.yml must define.
var requiredServices = append([]string{
	"kafka", "kafka-init", "nats", "otel-collector", "prometheus", "grafana",
}, ilbServices...)

// compose is docker-compose.yml decoded into generic maps. yaml.v3 resolves
// anchors and `<<` merge keys while decoding, as Compose does.
type compose struct {
	Services map[string]map[string]any `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	var c compose
	readYAML(t, repoPath("docker-compose.yml"), &c)
	if len(c.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	return c
}

func (c compose) service(t *testing.T, name string) map[string]any {
	t.Helper()
	s, ok := c.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml: no service %q", name)
	}
	return s
}

func TestComposeHasRequiredServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range requiredServices {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("docker-compose.yml: missing service %q", name)
		}
	}
}

func TestComposeKafkaIsKRaft(t *testing.T) {
	c := loadCompose(t)
	kafka := c.service(t, "kafka")
	if repo, _ := splitImage(asString(kafka["image"])); repo != "apache/kafka" {
		t.Errorf("kafka image %q, want apache/kafka", kafka["image"])
	}
	env := envOf(kafka)
	roles := strings.Split(env["KAFKA_PROCESS_ROLES"], ",")
	if !slices.Contains(roles, "controller") || !slices.Contains(roles, "broker") {
		t.Errorf("KAFKA_PROCESS_ROLES = %q, want broker,controller (single-node KRaft)", env["KAFKA_PROCESS_ROLES"])
	}
	for _, k := range []string{"KAFKA_NODE_ID", "KAFKA_CONTROLLER_QUORUM_VOTERS", "KAFKA_CONTROLLER_LISTENER_NAMES", "CLUSTER_ID"} {
		if env[k] == "" {
			t.Errorf("kafka: %s is not set", k)
		}
	}
	if _, ok := env["KAFKA_ZOOKEEPER_CONNECT"]; ok {
		t.Error("kafka: KAFKA_ZOOKEEPER_CONNECT set; the broker must run in KRaft mode")
	}
	if env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] != "false" {
		t.Errorf("KAFKA_AUTO_CREATE_TOPICS_ENABLE = %q, want false (kafka-init creates topics)", env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"])
	}
	if !healthcheckRuns(kafka, "kafka-broker-api-versions.sh") {
		t.Errorf("kafka: health check %v does not run kafka-broker-api-versions.sh", kafka["healthcheck"])
	}
}

// TestComposeKafkaListenersReachable checks that every address the ilb
// services dial is advertised by the broker, and that every port published
// to the host is advertised as 127.0.0.1 with that port, so clients on
// either side of the container network can follow the broker's metadata.
func TestComposeKafkaListenersReachable(t *testing.T) {
	c := loadCompose(t)
	kafka := c.service(t, "kafka")
	advertised := map[string]bool{}
	for _, l := range strings.Split(envOf(kafka)["KAFKA_ADVERTISED_LISTENERS"], ",") {
		if _, addr, ok := strings.Cut(l, "://"); ok {
			advertised[addr] = true
		}
	}
	for _, name := range ilbServices {
		addr, ok := flagValue(commandOf(c.service(t, name)), "--kafka")
		if !ok {
			t.Errorf("%s: no --kafka flag", name)
			continue
		}
		if !advertised[addr] {
			t.Errorf("%s dials Kafka at %q, not an advertised listener (%v)", name, addr, sortedKeys(advertised))
		}
	}
	for _, p := range asList(kafka["ports"]) {
		b, err := parsePort(p)
		if err != nil {
			t.Fatal(err)
		}
		if !advertised["127.0.0.1:"+b.hostPort] {
			t.Errorf("kafka publishes host port %s but advertises no 127.0.0.1:%s listener", b.hostPort, b.hostPort)
		}
	}
}

// TestComposeKafkaInitCreatesTopics checks the one-shot topic creation
// against the topic names in package schemas.
func TestComposeKafkaInitCreatesTopics(t *testing.T) {
	c := loadCompose(t)
	initSvc := c.service(t, "kafka-init")
	if cond := dependsOn(initSvc)["kafka"]; cond != "service_healthy" {
		t.Errorf("kafka-init waits for kafka with %q, want service_healthy", cond)
	}
	script := strings.Join(commandOf(initSvc), " ")
	created := map[string][]string{} // topic -> the words of its --create line
	for _, line := range strings.Split(script, "\n") {
		words := strings.Fields(line)
		if !slices.Contains(words, "--create") {
			continue
		}
		if !slices.Contains(words, "--if-not-exists") {
			t.Errorf("kafka-init: %q lacks --if-not-exists, so a restart would fail", line)
		}
		topic, _ := flagValue(words, "--topic")
		created[topic] = words
	}
	for _, topic := range []string{schemas.TopicSignals, schemas.TopicSignalsDLQ, schemas.TopicFeatures} {
		if _, ok := created[topic]; !ok {
			t.Errorf("kafka-init does not create topic %q (created: %v)", topic, sortedKeys(created))
		}
	}
	if p, _ := flagValue(created[schemas.TopicSignals], "--partitions"); p != "6" {
		t.Errorf("topic %s has %q partitions, want 6", schemas.TopicSignals, p)
	}
}

func TestComposeNATSVersion(t *testing.T) {
	c := loadCompose(t)
	nats := c.service(t, "nats")
	repo, tag := splitImage(asString(nats["image"]))
	if repo != "nats" {
		t.Fatalf("nats image %q, want the official nats image", nats["image"])
	}
	v, err := parseVersionTag(tag)
	if err != nil {
		t.Fatalf("nats image: %v", err)
	}
	if !natsVersionOK(v) {
		t.Errorf("nats %d.%d.%d has known JetStream data-loss bugs; want >= 2.12.3 (or >= 2.10.23 on 2.10)", v[0], v[1], v[2])
	}
	if !healthcheckRuns(nats, "/healthz?js-enabled-only=true") {
		t.Errorf("nats: health check %v does not ask /healthz?js-enabled-only=true", nats["healthcheck"])
	}
}

func TestComposePortsBindLoopback(t *testing.T) {
	c := loadCompose(t)
	for _, name := range sortedKeys(c.Services) {
		for _, p := range asList(c.Services[name]["ports"]) {
			b, err := parsePort(p)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if b.hostIP != "127.0.0.1" {
				t.Errorf("%s: port %v binds %q, want 127.0.0.1 only", name, p, b.hostIP)
			}
		}
	}
}

// TestComposeILBServices checks each service running the ilb binary: the
// shared image, health check on its own --http port, brokers healthy
// before it starts, the fleet file mounted where --fleet points.
func TestComposeILBServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range ilbServices {
		t.Run(name, func(t *testing.T) { checkILBService(t, c, name) })
	}
	for _, name := range sortedKeys(c.Services) {
		if asString(c.Services[name]["image"]) == "ilb:dev" && !slices.Contains(ilbServices, name) {
			t.Errorf("service %q runs ilb:dev but is not in ilbServices, so it goes unchecked", name)
		}
	}
}

func checkILBService(t *testing.T, c compose, name string) {
	svc := c.service(t, name)
	build := asMap(svc["build"])
	if asString(build["dockerfile"]) != "deploy/Dockerfile" || asString(build["context"]) != "." {
		t.Errorf("build = %v, want context . and dockerfile deploy/Dockerfile", svc["build"])
	}
	if img := asString(svc["image"]); img != "ilb:dev" {
		t.Errorf("image = %q, want ilb:dev", img)
	}
	if r := asString(svc["restart"]); r != "unless-stopped" {
		t.Errorf("restart = %q, want unless-stopped", r)
	}
	args := commandOf(svc)
	httpAddr, ok := flagValue(args, "--http")
	if !ok {
		t.Fatalf("command %v has no --http", args)
	}
	_, httpPort, _ := strings.Cut(httpAddr, ":")
	want := []string{"CMD", "/ilb", "healthcheck", "--url", "http://127.0.0.1:" + httpPort + "/healthz"}
	if got := asStrings(asMap(svc["healthcheck"])["test"]); !slices.Equal(got, want) {
		t.Errorf("healthcheck test = %q, want %q", got, want)
	}
	for _, p := range asList(svc["ports"]) {
		if b, err := parsePort(p); err == nil && b.containerPort != httpPort {
			t.Errorf("publishes container port %s, but the service listens on %s", b.containerPort, httpPort)
		}
	}
	deps := dependsOn(svc)
	wantDeps := map[string]string{"kafka": "service_healthy", "kafka-init": "service_completed_successfully"}
	if _, usesNATS := flagValue(args, "--nats"); usesNATS {
		wantDeps["nats"] = "service_healthy"
	}
	for dep, cond := range wantDeps {
		if deps[dep] != cond {
			t.Errorf("depends_on %s: condition %q, want %q", dep, deps[dep], cond)
		}
	}
	fleet, ok := flagValue(args, "--fleet")
	if !ok {
		t.Fatalf("command %v has no --fleet", args)
	}
	if src, ok := hostPathOf(svc, fleet); !ok || src != "deploy/fleets/compose.yaml" {
		t.Errorf("--fleet %s is mounted from %q, want deploy/fleets/compose.yaml", fleet, src)
	}
	otel := envOf(svc)["OTEL_EXPORTER_OTLP_ENDPOINT"]
	if u, err := url.Parse(otel); err != nil || c.Services[u.Hostname()] == nil {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT = %q does not name a compose service", otel)
	}
}

// TestComposeDataplanesCoverFleet checks there is exactly one data plane
// per front-end cluster of the fleet file the services are given.
func TestComposeDataplanesCoverFleet(t *testing.T) {
	c := loadCompose(t)
	served := map[string]string{} // cluster -> service
	for _, name := range ilbServices {
		args := commandOf(c.service(t, name))
		if len(args) == 0 || args[0] != "dataplane" {
			continue
		}
		cluster, _ := flagValue(args, "--cluster")
		if prev, dup := served[cluster]; dup {
			t.Errorf("cluster %q has two data planes: %s and %s", cluster, prev, name)
		}
		served[cluster] = name
	}
	fleet := loadFleet(t, "deploy/fleets/compose.yaml")
	var want []string
	for _, cl := range fleet.Clusters {
		want = append(want, cl.Name)
	}
	slices.Sort(want)
	if got := sortedKeys(served); !slices.Equal(got, want) {
		t.Errorf("data planes serve clusters %v; the fleet has %v", got, want)
	}
}

// TestComposeNATSUsers checks that each service dials NATS as the user its
// role needs, with the very password expression the NATS server is given.
func TestComposeNATSUsers(t *testing.T) {
	c := loadCompose(t)
	natsEnv := envOf(c.service(t, "nats"))
	wantUser := map[string]string{"optimizer": "optimizer", "dataplane": "dataplane"}
	for _, name := range ilbServices {
		args := commandOf(c.service(t, name))
		raw, ok := flagValue(args, "--nats")
		if !ok {
			continue
		}
		user, pass, host := splitNATSURL(raw)
		if want := wantUser[args[0]]; user != want {
			t.Errorf("%s dials NATS as %q, want %q", name, user, want)
		}
		envName := "NATS_" + strings.ToUpper(user) + "_PASSWORD"
		if pass != natsEnv[envName] {
			t.Errorf("%s: NATS password %q differs from the nats service's %s %q", name, pass, envName, natsEnv[envName])
		}
		if host != "nats:4222" {
			t.Errorf("%s: NATS address %q, want nats:4222", name, host)
		}
	}
}

// splitNATSURL splits nats://user:pass@host without url.Parse, because the
// password is still an uninterpolated ${VAR:-default} expression.
func splitNATSURL(raw string) (user, pass, host string) {
	rest := strings.TrimPrefix(raw, "nats://")
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return "", "", rest
	}
	user, pass, _ = strings.Cut(rest[:at], ":")
	return user, pass, rest[at+1:]
}

// TestComposeMountsExist checks every bind-mounted file or folder exists in
// the repository and every named volume is declared.
func TestComposeMountsExist(t *testing.T) {
	c := loadCompose(t)
	for _, name := range sortedKeys(c.Services) {
		for _, v := range asList(c.Services[name]["volumes"]) {
			m, err := parseMount(v)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if !m.bind {
				if _, ok := c.Volumes[m.source]; !ok {
					t.Errorf("%s: named volume %q is not declared under volumes:", name, m.source)
				}
				continue
			}
			if _, err := os.Stat(repoPath(m.source)); err != nil {
				t.Errorf("%s: mounts %q, which does not exist in the repository: %v", name, m.source, err)
			}
		}
	}
}

// TestComposeConfigValid asks Docker Compose itself to validate the file.
// It needs only the docker client and its compose plugin, no engine.
func TestComposeConfigValid(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker client not installed; the structural tests above still ran")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "compose", "version").CombinedOutput(); err != nil {
		t.Skipf("docker compose plugin unavailable (%v: %s); the structural tests above still ran", err, firstLine(out))
	}
	cmd := exec.CommandContext(ctx, docker, "compose", "-f", repoPath("docker-compose.yml"), "config", "-q")
	cmd.Dir = repoPath(".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker compose config -q: %v\n%s", err, out)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// repoPath returns a path in the repository root (tests run in integration/).
func repoPath(rel string) string { return filepath.Join("..", filepath.FromSlash(rel)) }

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
