package integration

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/otlptranslator"
)

// TestMetricsDocumented keeps deploy/METRICS.md and the code in step
// without starting anything. It parses the repository's Go sources, finds
// every OpenTelemetry instrument a package creates (named by a literal, a
// constant, or a parameter of a local helper such as the aggregator's
// counter(name, desc)), turns each into the Prometheus name the exporter
// serves (otlptranslator with the strategy services/internal/telemetry
// sets), and checks that
//   - every served metric has a row in METRICS.md, is named
//     ilb_<package>_..., and has the row's type, instrument name and unit;
//   - every row names a metric some package creates, unless it is listed
//     under "Known gaps" (a gap that is closed must leave that list).
func TestMetricsDocumented(t *testing.T) {
	code := scanInstruments(t)
	doc := readMetricsDoc(t)
	for _, prom := range slices.Sorted(maps.Keys(code)) {
		in := code[prom]
		row, ok := doc.rows[prom]
		if !ok {
			t.Errorf("%s: %s is served but deploy/METRICS.md has no row for it; add\n| `%s` | %s | ... | ... | %s |",
				in.pos, prom, prom, in.kind, in.docCell())
			continue
		}
		if want := "ilb_" + in.pkg + "_"; !strings.HasPrefix(prom, want) {
			t.Errorf("%s: %s does not start with %s (METRICS.md conventions)", in.pos, prom, want)
		}
		if row.kind != in.kind {
			t.Errorf("METRICS.md: %s is a %s; the code (%s) makes a %s", prom, row.kind, in.pos, in.kind)
		}
		if row.instrument != in.name || row.unit != in.unit {
			t.Errorf("METRICS.md: %s is instrument %q unit %q; the code (%s) says %s", prom, row.instrument, row.unit, in.pos, in.docCell())
		}
		if doc.gaps[prom] {
			t.Errorf("METRICS.md lists %s under Known gaps, but %s serves it now; remove the gap", prom, in.pos)
		}
	}
	for _, prom := range slices.Sorted(maps.Keys(doc.rows)) {
		if _, ok := code[prom]; !ok && !doc.gaps[prom] {
			t.Errorf("METRICS.md documents %s, but no package creates it (list it under Known gaps if the code is behind)", prom)
		}
	}
	for _, prom := range slices.Sorted(maps.Keys(doc.gaps)) {
		if _, ok := doc.rows[prom]; !ok {
			t.Errorf("METRICS.md: Known gaps names %s, which has no row", prom)
		}
	}
	t.Logf("%d instruments in the code, %d rows in METRICS.md, %d known gaps", len(code), len(doc.rows), len(doc.gaps))
}

// instrument is one OpenTelemetry instrument found in the code.
type instrument struct {
	name, unit string // as given to the meter
	instrumentKind
	pkg string // directory name: the service
	pos string // file:line
}

func (in instrument) docCell() string {
	if in.unit == "" {
		return "`" + in.name + "`"
	}
	return "`" + in.name + "` (" + in.unit + ")"
}

// instrumentKind is METRICS.md's type of an instrument and the type the
// exporter names it by (an up-down counter is served as a gauge, without
// _total).
type instrumentKind struct {
	kind string
	typ  otlptranslator.MetricType
}

// instrumentKinds maps the metric.Meter methods that create instruments to
// their kind.
var instrumentKinds = func() map[string]instrumentKind {
	m := map[string]instrumentKind{}
	for _, n := range []string{"Int64", "Float64"} {
		for _, o := range []string{"", "Observable"} {
			m[n+o+"Counter"] = instrumentKind{"counter", otlptranslator.MetricTypeMonotonicCounter}
			m[n+o+"UpDownCounter"] = instrumentKind{"gauge", otlptranslator.MetricTypeNonMonotonicCounter}
			m[n+o+"Gauge"] = instrumentKind{"gauge", otlptranslator.MetricTypeGauge}
		}
		m[n+"Histogram"] = instrumentKind{"histogram", otlptranslator.MetricTypeHistogram}
	}
	return m
}()

// scanInstruments returns the instruments of every non-test Go file in the
// repository by the Prometheus name they are served under.
func scanInstruments(t *testing.T) map[string]instrument {
	t.Helper()
	root := repoPath(".")
	byDir := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "integration") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]instrument{}
	var metered []string // packages that ask for a Meter
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		ins, usesMeter, problems := scanPackage(byDir[dir])
		for _, p := range problems {
			t.Error(p)
		}
		if !usesMeter {
			continue
		}
		metered = append(metered, filepath.Base(dir))
		if len(ins) == 0 {
			t.Errorf("%s asks for a Meter but no instrument was found there; teach scanPackage its pattern", dir)
		}
		for prom, in := range promNames(t, ins) {
			out[prom] = in
		}
	}
	if len(metered) < 6 {
		t.Errorf("instruments found in %v only; six services export metrics, so the scan is broken", metered)
	}
	return out
}

// promNames names instruments as the Prometheus exporter does.
func promNames(t *testing.T, ins []instrument) map[string]instrument {
	t.Helper()
	namer := otlptranslator.NewMetricNamer("", otlptranslator.UnderscoreEscapingWithSuffixes)
	out := map[string]instrument{}
	for _, in := range ins {
		prom, err := namer.Build(otlptranslator.Metric{Name: in.name, Unit: in.unit, Type: in.typ})
		if err != nil {
			t.Errorf("%s: %q: %v", in.pos, in.name, err)
			continue
		}
		out[prom] = in
	}
	return out
}

// scanPackage parses one package's files and returns its instruments,
// whether it asks a MeterProvider for a Meter at all, and the instrument
// names it could not work out.
func scanPackage(files []string) (ins []instrument, usesMeter bool, problems []string) {
	fset := token.NewFileSet()
	consts := map[string]string{} // package-level string constants
	var parsed []*ast.File
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, false, []string{err.Error()}
		}
		parsed = append(parsed, af)
		for _, decl := range af.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				addStringConsts(consts, g)
			}
		}
	}
	for i, af := range parsed {
		s := &fileScan{fset: fset, consts: consts, file: af, pkg: filepath.Base(filepath.Dir(files[i]))}
		s.indexHelpers()
		var stack []ast.Node // enclosing nodes, for parameters of helpers
		ast.Inspect(af, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				usesMeter = usesMeter || sel.Sel.Name == "Meter"
				if k, ok := instrumentKinds[sel.Sel.Name]; ok && len(call.Args) > 0 {
					s.instruments(call, k, stack)
				}
			}
			return true
		})
		ins, problems = append(ins, s.found...), append(problems, s.problems...)
	}
	return ins, usesMeter, problems
}

func addStringConsts(consts map[string]string, g *ast.GenDecl) {
	for _, spec := range g.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					consts[name.Name] = v
				}
			}
		}
	}
}

// fileScan finds the instruments of one file.
type fileScan struct {
	fset     *token.FileSet
	consts   map[string]string
	file     *ast.File
	pkg      string
	helpers  map[*ast.FuncLit]*ast.Object // `helper := func(...) {...}` -> helper
	found    []instrument
	problems []string
}

func (s *fileScan) indexHelpers() {
	s.helpers = map[*ast.FuncLit]*ast.Object{}
	ast.Inspect(s.file, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, rhs := range as.Rhs {
			fl, ok1 := rhs.(*ast.FuncLit)
			id, ok2 := as.Lhs[i].(*ast.Ident)
			if ok1 && ok2 && id.Obj != nil {
				s.helpers[fl] = id.Obj
			}
		}
		return true
	})
}

func (s *fileScan) where(p token.Pos) string {
	pos := s.fset.Position(p)
	return fmt.Sprintf("%s/%s:%d", s.pkg, filepath.Base(pos.Filename), pos.Line)
}

// instruments records what call creates: one instrument, or, when the name
// is a parameter of a local helper, one per call of the helper.
func (s *fileScan) instruments(call *ast.CallExpr, k instrumentKind, stack []ast.Node) {
	unit := ""
	for _, opt := range call.Args[1:] {
		if c, ok := opt.(*ast.CallExpr); ok && len(c.Args) == 1 {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "WithUnit" {
				unit = s.constant(c.Args[0])
			}
		}
	}
	add := func(name ast.Expr, at token.Pos) {
		v := s.constant(name)
		if v == "" {
			s.problems = append(s.problems, fmt.Sprintf("%s: cannot tell this instrument's name; use a string constant", s.where(at)))
			return
		}
		s.found = append(s.found, instrument{name: v, unit: unit, instrumentKind: k, pkg: s.pkg, pos: s.where(at)})
	}
	helper, idx := s.paramOf(call.Args[0], stack)
	if helper == nil {
		add(call.Args[0], call.Pos())
		return
	}
	calls := 0
	ast.Inspect(s.file, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Obj == helper && idx < len(c.Args) {
				calls++
				add(c.Args[idx], c.Pos())
			}
		}
		return true
	})
	if calls == 0 {
		s.problems = append(s.problems, fmt.Sprintf("%s: helper %s is never called", s.where(call.Pos()), helper.Name))
	}
}

// constant is the value of a string literal or string constant, else "".
func (s *fileScan) constant(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if v, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
			return v
		}
	case *ast.Ident:
		if e.Obj == nil || e.Obj.Kind == ast.Con { // nil: declared in another file
			return s.consts[e.Name]
		}
	}
	return ""
}

// paramOf reports which local helper e is a parameter of, and its index.
func (s *fileScan) paramOf(e ast.Expr, stack []ast.Node) (*ast.Object, int) {
	id, ok := e.(*ast.Ident)
	if !ok || id.Obj == nil || id.Obj.Kind != ast.Var {
		return nil, 0
	}
	for i := len(stack) - 1; i >= 0; i-- {
		fl, ok := stack[i].(*ast.FuncLit)
		if !ok {
			continue
		}
		idx := 0
		for _, field := range fl.Type.Params.List {
			for _, name := range field.Names {
				if name.Obj == id.Obj {
					return s.helpers[fl], idx
				}
				idx++
			}
		}
	}
	return nil, 0
}

// metricsDoc is what deploy/METRICS.md promises.
type metricsDoc struct {
	rows map[string]metricsRow
	gaps map[string]bool // names under "## Known gaps"
}

type metricsRow struct{ kind, instrument, unit string }

// readMetricsDoc parses the rows
// | `prom_name` | type | labels | meaning | `otel.name` (unit) |
// and the names listed under "## Known gaps".
func readMetricsDoc(t *testing.T) metricsDoc {
	t.Helper()
	text := readFile(t, repoPath("deploy/METRICS.md"))
	doc := metricsDoc{rows: map[string]metricsRow{}, gaps: map[string]bool{}}
	row := regexp.MustCompile("^\\| `(ilb_[a-z0-9_]+)` \\| (counter|gauge|histogram) \\| .* \\| `([^`]+)`(?: \\(([^)]*)\\))? \\|$")
	name := regexp.MustCompile("`(ilb_[a-z0-9_]+)`")
	section := ""
	for i, line := range strings.Split(text, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		if section == "Known gaps" {
			for _, m := range name.FindAllStringSubmatch(line, -1) {
				doc.gaps[m[1]] = true
			}
			continue
		}
		if !strings.HasPrefix(line, "| `ilb_") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("deploy/METRICS.md:%d: not | `name` | counter|gauge|histogram | labels | meaning | `instrument` (unit) |: %s", i+1, line)
			continue
		}
		if _, dup := doc.rows[m[1]]; dup {
			t.Errorf("deploy/METRICS.md:%d: %s documented twice", i+1, m[1])
		}
		unit := m[4]
		if unit == "no unit" {
			unit = ""
		}
		doc.rows[m[1]] = metricsRow{kind: m[2], instrument: m[3], unit: unit}
	}
	if len(doc.rows) == 0 {
		t.Fatal("deploy/METRICS.md: no metric rows")
	}
	return doc
}

// TestMetricsScanner runs the scanner on a package written for it, with a
// known answer, so a pattern it misses fails here and not silently.
func TestMetricsScanner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"names.go": "package demo\n\nconst nameA = \"ilb.demo.requests\"\n",
		"demo.go": `package demo

import "go.opentelemetry.io/otel/metric"

func setup(mp metric.MeterProvider, dynamic string) {
	m := mp.Meter("demo")
	m.Int64Counter(nameA)
	m.Float64Histogram("ilb.demo.wait", metric.WithUnit("s"))
	m.Int64ObservableUpDownCounter("ilb_demo_open")
	m.Float64Gauge(dynamic)
	counter := func(name, desc string) {
		m.Int64ObservableCounter(name, metric.WithDescription(desc))
	}
	counter("ilb.demo.batches", "x")
	counter(nameA+"x", "y")
}
`,
	}
	var paths []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(files[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	ins, usesMeter, problems := scanPackage(paths)
	if !usesMeter {
		t.Error("the Meter call was not seen")
	}
	got := map[string]string{}
	for prom, in := range promNames(t, ins) {
		got[prom] = in.kind + " " + in.name + " " + in.pos
	}
	want := map[string]string{
		"ilb_demo_requests_total": "counter ilb.demo.requests demo/demo.go:7",
		"ilb_demo_wait_seconds":   "histogram ilb.demo.wait demo/demo.go:8",
		"ilb_demo_open":           "gauge ilb_demo_open demo/demo.go:9",
		"ilb_demo_batches_total":  "counter ilb.demo.batches demo/demo.go:14",
	}
	if !maps.Equal(got, want) {
		t.Errorf("scanned %v\nwant    %v", got, want)
	}
	wantProblems := []string{
		"demo/demo.go:10: cannot tell this instrument's name; use a string constant",
		"demo/demo.go:15: cannot tell this instrument's name; use a string constant",
	}
	if !slices.Equal(problems, wantProblems) {
		t.Errorf("problems %q\nwant     %q", problems, wantProblems)
	}
}
