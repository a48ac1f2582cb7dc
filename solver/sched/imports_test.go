package sched

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package must stay pure and standalone: standard library only, and
// nothing that reaches the outside world, the clock or randomness.
func TestImportsArePure(t *testing.T) {
	forbidden := map[string]bool{
		"os": true, "io": true, "net": true, "time": true, "log": true, "syscall": true,
		"unsafe": true, "sync": true, "math/rand": true, "math/rand/v2": true,
		"hash/maphash": true, "crypto/rand": true, "runtime": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") || forbidden[path] {
				t.Errorf("%s imports %q", name, path)
			}
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "// Package sched ") || !strings.Contains(string(doc), "// # Concurrency") {
		t.Error("doc.go lacks the package comment or its # Concurrency section")
	}
}
