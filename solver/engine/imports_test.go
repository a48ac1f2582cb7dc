package engine

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package pure: standard library and gonum only, so
// that nothing of ilb, and no I/O or telemetry library, creeps in; and it
// keeps the package doc with its Concurrency section.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	doc := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		doc = doc || (f.Doc != nil && strings.Contains(f.Doc.Text(), "# Concurrency"))
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			stdlib := !strings.Contains(first, ".")
			if (!stdlib && !strings.HasPrefix(path, "gonum.org/v1/gonum/")) || path == "os" || path == "time" || strings.HasPrefix(path, "net") {
				t.Errorf("%s imports %q: the engine model is pure (stdlib without I/O or clock, and gonum)", name, path)
			}
		}
	}
	if !doc {
		t.Error("no package doc comment with a # Concurrency section")
	}
}
