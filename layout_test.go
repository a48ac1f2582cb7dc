package ilb_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ilb-router/ilb"

type pkg struct {
	ImportPath   string
	Doc          string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json", "./...")
	cmd.Env = append(cmd.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// allowed reports whether package from may depend on ours, per STYLE.md:
// services -> streams -> schemas; solver stands alone; a service never
// imports another service; nothing imports services/ilb or integration.
func allowed(from, to string) bool {
	switch {
	case to == from:
		return true
	case under(to, "services/ilb"), under(to, "integration"):
		return false
	case from == "" || under(from, "integration"):
		return true
	case under(from, "schemas"):
		return under(to, "schemas")
	case under(from, "solver"):
		return under(to, "solver")
	case under(from, "streams"):
		return under(to, "streams") || under(to, "schemas")
	case under(from, "services/ilb"):
		return true
	case under(from, "services/internal"):
		return under(to, "services/internal") || !under(to, "services")
	case under(from, "services"):
		svc := strings.SplitN(from, "/", 3)[1]
		return !under(to, "services") || under(to, "services/internal") || under(to, "services/"+svc)
	}
	return false
}

func TestDependencyDirection(t *testing.T) {
	for _, p := range listPackages(t) {
		from := rel(p.ImportPath)
		deps := append(append(append([]string{}, p.Deps...), p.TestImports...), p.XTestImports...)
		for _, d := range deps {
			if !strings.HasPrefix(d, module) {
				continue
			}
			if to := rel(d); !allowed(from, to) {
				t.Errorf("%s depends on %s: against the direction in STYLE.md", from, to)
			}
		}
	}
}

func TestAllowedRules(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"services/dataplane", "solver/sched", true},
		{"services/dataplane", "services/optimizer", false},
		{"services/dataplane", "services/internal/run", true},
		{"streams/kv", "schemas", true},
		{"streams/kv", "solver/sched", false},
		{"schemas", "streams/kv", false},
		{"solver/optimize", "schemas", false},
		{"services/ilb", "services/dataplane", true},
		{"services/dataplane", "services/ilb", false},
		{"integration", "services/dataplane", true},
	} {
		if got := allowed(c.from, c.to); got != c.ok {
			t.Errorf("allowed(%s -> %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

func TestEveryPackageHasDoc(t *testing.T) {
	for _, p := range listPackages(t) {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package doc comment", p.ImportPath)
		}
	}
}
