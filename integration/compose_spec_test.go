package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// These tests load docker-compose.yml with compose-go, the library
// `docker compose config` is built on, with what that command turns on:
// the compose JSON schema, interpolation, relative paths resolved against
// the project directory (the repository root), normalisation and the
// consistency checks (depends_on, volumes and networks name things that
// exist). No Docker engine, network or env file is involved: the
// environment is the variable table of deploy/README.md, never the
// caller's shell or a .env file, so the result does not depend on who runs
// the test. compose_test.go reads the same file into generic maps; these
// tests check what only a real Compose loader can.

// composeLoad is docker-compose.yml as Compose sees it.
type composeLoad struct {
	project *types.Project
	lookups map[string]bool // variables the file interpolates
}

// loadComposeSpec loads file with the project directory at the repository
// root and env as the only environment.
func loadComposeSpec(t *testing.T, file string, env map[string]string) (composeLoad, error) {
	t.Helper()
	root, err := filepath.Abs(repoPath("."))
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	out := composeLoad{lookups: map[string]bool{}}
	wrapped := false
	// record runs on every loader.Options compose-go builds; only the one
	// that loads the project carries the interpolation settings.
	record := func(o *loader.Options) {
		if o.Interpolate == nil {
			return
		}
		if o.SkipInterpolation || o.SkipValidation || o.SkipConsistencyCheck || !o.ResolvePaths {
			t.Fatalf("compose-go: interpolation, schema validation, consistency check or path resolution is off: %+v", *o)
		}
		wrapped = true
		lookup := o.Interpolate.LookupValue
		o.Interpolate.LookupValue = func(key string) (string, bool) {
			mu.Lock()
			out.lookups[key] = true
			mu.Unlock()
			return lookup(key)
		}
	}
	var envList []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, k+"="+env[k])
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(envList),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
		cli.WithLoadOptions(record),
	)
	if err != nil {
		t.Fatal(err)
	}
	out.project, err = opts.LoadProject(context.Background())
	if !wrapped {
		t.Fatal("compose-go: the loader never got interpolation options")
	}
	return out, err
}

// documentedComposeEnv reads the variable | default | used by table of
// deploy/README.md ("Credentials").
func documentedComposeEnv(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\| `([^`]*)` \\|")
	for _, m := range row.FindAllStringSubmatch(readFile(t, repoPath("deploy/README.md")), -1) {
		env[m[1]] = m[2]
	}
	if len(env) == 0 {
		t.Fatal("deploy/README.md: no | `VARIABLE` | `default` | rows")
	}
	return env
}

func TestComposeSpecConfig(t *testing.T) {
	env := documentedComposeEnv(t)
	l, err := loadComposeSpec(t, repoPath("docker-compose.yml"), env)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load as `docker compose config` would: %v", err)
	}
	p := l.project
	if p.Name != "ilb" {
		t.Errorf("project name %q, want ilb", p.Name)
	}
	for _, problem := range checkComposeProject(p) {
		t.Error(problem)
	}
	if got, want := slices.Sorted(maps.Keys(l.lookups)), slices.Sorted(maps.Keys(env)); !slices.Equal(got, want) {
		t.Errorf("docker-compose.yml interpolates %v; deploy/README.md documents %v", got, want)
	}
	out, err := p.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("normalized config (as `docker compose config` prints it): %d bytes, %d lines, %d services",
		len(out), strings.Count(string(out), "\n"), len(p.Services))
}

// TestComposeSpecDefaults checks that the file's ${VAR:-default} fallbacks
// are the defaults deploy/README.md documents (an empty environment gives
// the same config), and that setting a variable reaches the config and
// replaces its default everywhere.
func TestComposeSpecDefaults(t *testing.T) {
	documented := documentedComposeEnv(t)
	marshal := func(env map[string]string) string {
		l, err := loadComposeSpec(t, repoPath("docker-compose.yml"), env)
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.project.MarshalYAML()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	withDocs := marshal(documented)
	if unset := marshal(nil); unset != withDocs {
		t.Errorf("with no variables set the config differs from the one with deploy/README.md's defaults:\n%s", firstDiff(unset, withDocs))
	}
	overrides := map[string]string{}
	for k := range documented {
		overrides[k] = "override-" + strings.ToLower(k)
	}
	overridden := marshal(overrides)
	for k, v := range overrides {
		if !strings.Contains(overridden, v) {
			t.Errorf("setting %s does not reach the config", k)
		}
		if strings.Contains(overridden, documented[k]) {
			t.Errorf("with %s set, its default %q is still in the config (hard-coded somewhere?)", k, documented[k])
		}
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d: %q vs %q", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(la), len(lb))
}

// checkComposeProject returns what is wrong with a loaded project.
func checkComposeProject(p *types.Project) []string {
	var out []string
	for _, name := range requiredServices {
		if _, ok := p.Services[name]; !ok {
			out = append(out, fmt.Sprintf("missing service %q", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		svc := p.Services[name]
		out = append(out, checkSpecDependsOn(p, name, svc)...)
		out = append(out, checkSpecPorts(name, svc)...)
		out = append(out, checkSpecHealthcheck(name, svc)...)
		out = append(out, checkSpecPaths(p.WorkingDir, name, svc)...)
		if len(svc.EnvFiles) > 0 {
			out = append(out, fmt.Sprintf("%s: env_file %v; keep the file self-contained (deploy/README.md lists every variable)", name, svc.EnvFiles))
		}
	}
	return out
}

// wantSpecDependsOn is what compose_test.go expects a service to wait for.
func wantSpecDependsOn(name string, svc types.ServiceConfig) map[string]string {
	switch {
	case name == "kafka-init":
		return map[string]string{"kafka": types.ServiceConditionHealthy}
	case slices.Contains(ilbServices, name):
		want := map[string]string{
			"kafka":      types.ServiceConditionHealthy,
			"kafka-init": types.ServiceConditionCompletedSuccessfully,
		}
		if _, ok := flagValue(svc.Command, "--nats"); ok {
			want["nats"] = types.ServiceConditionHealthy
		}
		return want
	}
	return nil
}

func checkSpecDependsOn(p *types.Project, name string, svc types.ServiceConfig) []string {
	var out []string
	want := wantSpecDependsOn(name, svc)
	for _, dep := range slices.Sorted(maps.Keys(want)) {
		if got := svc.DependsOn[dep].Condition; got != want[dep] {
			out = append(out, fmt.Sprintf("%s: depends_on %s with condition %q, want %q", name, dep, got, want[dep]))
		}
	}
	for _, dep := range slices.Sorted(maps.Keys(svc.DependsOn)) {
		if svc.DependsOn[dep].Condition != types.ServiceConditionHealthy {
			continue
		}
		if hc := p.Services[dep].HealthCheck; hc == nil || hc.Disable {
			out = append(out, fmt.Sprintf("%s waits for %s to be healthy, but %s has no health check", name, dep, dep))
		}
	}
	return out
}

func checkSpecPorts(name string, svc types.ServiceConfig) []string {
	var out []string
	for _, port := range svc.Ports {
		if port.HostIP != "127.0.0.1" || port.Published == "" {
			out = append(out, fmt.Sprintf("%s: container port %d is published on %q:%q, want 127.0.0.1 and a fixed port",
				name, port.Target, port.HostIP, port.Published))
		}
	}
	return out
}

func checkSpecHealthcheck(name string, svc types.ServiceConfig) []string {
	hc := svc.HealthCheck
	if hc == nil {
		if slices.Contains(ilbServices, name) {
			return []string{name + ": no health check"}
		}
		return nil
	}
	if hc.Disable {
		return nil
	}
	if len(hc.Test) < 2 || (hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL") {
		return []string{fmt.Sprintf("%s: health check test %q, want [CMD ...] or [CMD-SHELL ...]", name, hc.Test)}
	}
	return nil
}

// checkSpecPaths checks the paths Compose resolved against the project
// directory: bind mounts and build files exist inside the repository.
func checkSpecPaths(root, name string, svc types.ServiceConfig) []string {
	var out []string
	inRepo := func(what, path string) {
		rel, err := filepath.Rel(root, path)
		if err != nil || !filepath.IsAbs(path) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			out = append(out, fmt.Sprintf("%s: %s %q is not resolved inside the repository %s", name, what, path, root))
			return
		}
		if _, err := os.Stat(path); err != nil {
			out = append(out, fmt.Sprintf("%s: %s: %v", name, what, err))
		}
	}
	for _, v := range svc.Volumes {
		if v.Type == types.VolumeTypeBind {
			inRepo("bind mount for "+v.Target, v.Source)
		}
	}
	if b := svc.Build; b != nil {
		inRepo("build context", b.Context)
		df := b.Dockerfile
		if !filepath.IsAbs(df) {
			df = filepath.Join(b.Context, df)
		}
		inRepo("dockerfile", df)
	}
	return out
}

// TestComposeSpecRejects breaks copies of docker-compose.yml on purpose and
// checks that the loader or checkComposeProject names what is wrong, so
// the tests above can fail.
func TestComposeSpecRejects(t *testing.T) {
	orig := readFile(t, repoPath("docker-compose.yml"))
	for _, tc := range []struct {
		name     string
		old, new string
		loadErr  bool     // the loader itself must refuse the file
		want     []string // in the error or in one problem
	}{
		{"unknown service key", "  kafka:\n    # Apache", "  kafka:\n    restat: always\n    # Apache", true,
			[]string{"kafka", "restat"}},
		{"ports not a list", "    ports:\n      - \"127.0.0.1:4222:4222\"\n      - \"127.0.0.1:8222:8222\"\n", "    ports: \"x\"\n", true,
			[]string{"nats", "ports"}},
		{"unknown condition", "kafka: {condition: service_healthy}\n    entrypoint", "kafka: {condition: service_healty}\n    entrypoint", true,
			[]string{"kafka-init", "condition"}},
		{"depends on a missing service", "  kafka-init: {condition: service_completed_successfully}\n", "  kafka-inti: {condition: service_completed_successfully}\n", true,
			[]string{"kafka-inti"}},
		{"port on every interface", `"127.0.0.1:8091:8091"`, `"8091:8091"`, false,
			[]string{"aggregator", "8091"}},
		{"weaker dependency", "  kafka-init: {condition: service_completed_successfully}\n", "  kafka-init: {condition: service_started}\n", false,
			[]string{"engine-sim", "kafka-init", "service_completed_successfully"}},
		{"health check without test", "      test: [\"CMD\", \"wget\", \"-q\", \"-O\", \"/dev/null\", \"http://127.0.0.1:9090/-/ready\"]\n", "", false,
			[]string{"prometheus", "health check"}},
		{"mount outside the repository", "./deploy/otel/collector.yaml:", "../collector.yaml:", false,
			[]string{"otel-collector", "not resolved inside the repository"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := strings.Count(orig, tc.old); n != 1 {
				t.Fatalf("docker-compose.yml holds %q %d times, want once; update this case", tc.old, n)
			}
			file := filepath.Join(t.TempDir(), "docker-compose.yml")
			if err := os.WriteFile(file, []byte(strings.Replace(orig, tc.old, tc.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := loadComposeSpec(t, file, documentedComposeEnv(t))
			if tc.loadErr {
				if err == nil {
					t.Fatal("the broken file loaded without an error")
				}
				if !containsAll(err.Error(), tc.want) {
					t.Errorf("error %q does not name %q", err, tc.want)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("the file should load (only the checks here catch this), got %v", err)
			}
			problems := checkComposeProject(l.project)
			if !slices.ContainsFunc(problems, func(p string) bool { return containsAll(p, tc.want) }) {
				t.Errorf("no problem names %q; got %q", tc.want, problems)
			}
		})
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
