package optimize

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeTangentMPS writes the tangent-cut LP of p in free MPS: variables x
// (one per usable arc), shed s_c, load λ_e ≤ u_e and engine cost t_e;
// rows: demand (Σx + s = d), load (Σx − λ = 0), and cuts per engine
// t_e − F'(λk)·λ_e ≥ F(λk) − F'(λk)·λk at cuts loads crowding toward the
// cap. Its optimum is a lower bound on p's (total rps·ms); an independent
// check that COIN-OR CLP or GLPK can solve.
func writeTangentMPS(w io.Writer, p *Problem, cuts int) error {
	m := newModel(p)
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "NAME ilbtangent")
	fmt.Fprintln(bw, "ROWS")
	fmt.Fprintln(bw, " N cost")
	for c := range m.nc {
		fmt.Fprintf(bw, " E d%d\n", c)
	}
	for e := range m.ne {
		fmt.Fprintf(bw, " E l%d\n", e)
		for k := range cuts {
			fmt.Fprintf(bw, " G k%d_%d\n", e, k)
		}
	}
	fmt.Fprintln(bw, "COLUMNS")
	for c := range m.nc {
		lo, hi := m.arcs(c)
		for a := lo; a < hi; a++ {
			fmt.Fprintf(bw, " x%d cost %.17g d%d 1\n", a, m.arcNet[a], c)
			fmt.Fprintf(bw, " x%d l%d 1\n", a, m.arcEng[a])
		}
		fmt.Fprintf(bw, " s%d cost %.17g d%d 1\n", c, m.penalty, c)
	}
	for e := range m.ne { // MPS wants each column's entries together
		f := &m.eng[e]
		fmt.Fprintf(bw, " L%d l%d -1\n", e, e)
		for k := range cuts {
			d1, _ := f.marginal(cutLoad(f, k, cuts))
			fmt.Fprintf(bw, " L%d k%d_%d %.17g\n", e, e, k, -d1)
		}
		fmt.Fprintf(bw, " T%d cost 1\n", e)
		for k := range cuts {
			fmt.Fprintf(bw, " T%d k%d_%d 1\n", e, e, k)
		}
	}
	fmt.Fprintln(bw, "RHS")
	for c, d := range m.demand {
		fmt.Fprintf(bw, " rhs d%d %.17g\n", c, d)
	}
	for e := range m.ne {
		f := &m.eng[e]
		for k := range cuts {
			l := cutLoad(f, k, cuts)
			d1, _ := f.marginal(l)
			fmt.Fprintf(bw, " rhs k%d_%d %.17g\n", e, k, f.cost(l)-d1*l)
		}
	}
	fmt.Fprintln(bw, "BOUNDS")
	for e := range m.ne {
		fmt.Fprintf(bw, " UP bnd L%d %.17g\n", e, m.eng[e].u)
	}
	fmt.Fprintln(bw, "ENDATA")
	return bw.Flush()
}

func cutLoad(f *engineCost, k, cuts int) float64 {
	r := float64(k) / float64(cuts-1)
	return f.u * (1 - (1-r)*(1-r))
}

var (
	clpObjective  = regexp.MustCompile(`Optimal objective\s+([-+0-9.eE]+)`)
	glpkObjective = regexp.MustCompile(`Objective:\s+cost = ([-+0-9.eE]+)`)
)

// runLP times an external LP solver on an MPS file, whole process included,
// and returns its optimal objective.
func runLP(t *testing.T, name string, args []string, re *regexp.Regexp, outFile string) (float64, time.Duration, error) {
	start := time.Now()
	out, err := exec.Command(name, args...).CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return 0, took, fmt.Errorf("%s: %v: %s", name, err, out)
	}
	if outFile != "" {
		if out, err = os.ReadFile(outFile); err != nil {
			return 0, took, err
		}
	}
	mm := re.FindSubmatch(out)
	if mm == nil {
		return 0, took, fmt.Errorf("%s: no objective in output:\n%s", name, out)
	}
	v, err := strconv.ParseFloat(string(mm[1]), 64)
	return v, took, err
}

// TestCompareWithLPSolvers checks Solve against the tangent-cut LP solved
// by COIN-OR CLP and GLPK on random fleets with real inter-region RTTs,
// and logs both objectives and times. It is slow and needs the solvers
// (apt-get install coinor-clp glpk-utils), so it runs only with
// ILB_LP_COMPARE=1; ILB_LP_DIR keeps the problem and LP files (to time
// `ilb solve` on the same problem), ILB_LP_SIZES picks sizes, for example
// "100x1000,300x3000", and ILB_LP_SOLVERS the solvers ("clp,glpsol").
func TestCompareWithLPSolvers(t *testing.T) {
	if os.Getenv("ILB_LP_COMPARE") == "" {
		t.Skip("set ILB_LP_COMPARE=1 to compare with CLP and GLPK")
	}
	dir := os.Getenv("ILB_LP_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	sizes := os.Getenv("ILB_LP_SIZES")
	if sizes == "" {
		sizes = "10x50,100x1000"
	}
	for _, size := range regexp.MustCompile(`\d+x\d+`).FindAllString(sizes, -1) {
		var nc, ne int
		fmt.Sscanf(size, "%dx%d", &nc, &ne)
		t.Run(size, func(t *testing.T) { compareSize(t, dir, nc, ne) })
	}
}

func compareSize(t *testing.T, dir string, nc, ne int) {
	p := randomFleet(t, newRand(uint64(nc*7919+ne)), fleetSpec{clusters: nc, engines: ne,
		load: 0.7, regions: min(30, max(5, nc/4)), restricted: 0.1})
	base := filepath.Join(dir, fmt.Sprintf("fleet-%dx%d", nc, ne))
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".json", data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(base + ".mps")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeTangentMPS(f, p, 50); err != nil {
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	sol, err := Solve(p, DefaultOptions())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, c := range p.Clusters {
		total += c.DemandRps
	}
	t.Logf("Solve: %.9f ms (bound %.9f, gap %.1e) in %v", sol.ObjectiveMs, sol.LowerBoundMs, sol.Gap, took)
	solvers := []struct {
		name string
		args []string
		re   *regexp.Regexp
		out  string
	}{
		{"clp", []string{base + ".mps", "-dualsimplex"}, clpObjective, ""},
		{"glpsol", []string{"--freemps", base + ".mps", "--output", base + ".glpk"}, glpkObjective, base + ".glpk"},
	}
	for _, s := range solvers {
		if want := os.Getenv("ILB_LP_SOLVERS"); want != "" && !strings.Contains(want, s.name) {
			continue
		}
		if _, err := exec.LookPath(s.name); err != nil {
			t.Logf("%s: not installed", s.name)
			continue
		}
		obj, took, err := runLP(t, s.name, s.args, s.re, s.out)
		if err != nil {
			t.Error(err)
			continue
		}
		lower := obj / total
		t.Logf("%s: LP bound %.9f ms in %v (whole process); Solve is %.2e above it", s.name, lower, took, (sol.ObjectiveMs-lower)/lower)
		if sol.ObjectiveMs < lower*(1-1e-9) {
			t.Errorf("%s: Solve's %.9f below the LP lower bound %.9f", s.name, sol.ObjectiveMs, lower)
		}
		if sol.ObjectiveMs > lower*(1+1e-3) {
			t.Errorf("%s: Solve's %.9f more than 0.1%% above the LP bound %.9f", s.name, sol.ObjectiveMs, lower)
		}
	}
}
