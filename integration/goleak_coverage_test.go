package integration

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGoleakCoversEveryRun: every package of services/ and streams/ with
// a long-running Run(ctx context.Context) method checks for leaked
// goroutines in its tests (goleak.VerifyTestMain, or goleak.VerifyNone in
// the test that runs it), and its tests do call Run: a service whose Run
// leaves a goroutine behind fails its own package's tests. (The
// integration tests add checkLeaks around whole stacks.)
func TestGoleakCoversEveryRun(t *testing.T) {
	pkgs := map[string]*runPkg{}
	for _, root := range []string{"../services", "../streams"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			dir := filepath.Dir(path)
			if pkgs[dir] == nil {
				pkgs[dir] = &runPkg{}
			}
			return pkgs[dir].scan(path)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var checked []string
	for _, dir := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[dir]
		if len(p.runs) == 0 {
			continue
		}
		checked = append(checked, filepath.Base(dir))
		if !p.goleak {
			t.Errorf("%s has %v but its tests do not use goleak", dir, p.runs)
		}
		if !p.testsCallRun {
			t.Errorf("%s has %v but its tests never call Run", dir, p.runs)
		}
	}
	if len(checked) < 8 {
		t.Fatalf("found Run methods in only %v; the scan is broken", checked)
	}
	t.Logf("goleak covers the Run of: %s", strings.Join(checked, ", "))
}

// runPkg is what one package directory shows.
type runPkg struct {
	runs         []string // receiver types with a Run(ctx context.Context) method
	goleak       bool     // a test file calls goleak.VerifyTestMain or VerifyNone
	testsCallRun bool     // a test file calls something's Run
}

func (p *runPkg) scan(path string) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(path, "_test.go") {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.Name == "Run" && takesContext(fd) {
				p.runs = append(p.runs, recvName(fd))
			}
		}
		return nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "goleak" && strings.HasPrefix(sel.Sel.Name, "Verify") {
			p.goleak = true
		}
		return true
	})
	// A call or a method value (go a.Run(ctx), runSvc(t, "x", a.Run)),
	// but not a subtest (t.Run).
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Run" {
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "t" {
				p.testsCallRun = true
			}
		}
		return true
	})
	return nil
}

func takesContext(fd *ast.FuncDecl) bool {
	ps := fd.Type.Params.List
	if len(ps) == 0 {
		return false
	}
	sel, ok := ps[0].Type.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Context"
}

func recvName(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + ".Run"
	}
	return "Run"
}
