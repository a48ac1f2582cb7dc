package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/solver/optimize"
)

const talkProblem = "../../solver/optimize/testdata/talk.json"

func runSolve(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(context.Background(), append([]string{"solve"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestSolveTalkProblem(t *testing.T) {
	code, out, errs := runSolve(t, "--problem", talkProblem)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sol map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &sol); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	// The fields DESIGN.md names.
	for _, f := range []string{"objective_ms", "weights", "shed_fraction", "engine_load_rps", "solve_ms"} {
		if _, ok := sol[f]; !ok {
			t.Errorf("solution lacks %q", f)
		}
	}
	var s optimize.Solution
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	for c, w := range s.Weights {
		sum := s.ShedFraction[c]
		for _, v := range w {
			sum += v
		}
		if sum < 1-1e-9 || sum > 1+1e-9 {
			t.Errorf("cluster %s: weights and shed sum to %v", c, sum)
		}
	}
	if s.Weights["fe-b"]["eng-c"] <= 0 || s.SolveMs <= 0 || s.Gap > 1e-9 {
		t.Errorf("solution %+v", s)
	}
}

func TestSolveWritesOutFileAndWarmStarts(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "first.json")
	if code, out, errs := runSolve(t, "--problem", talkProblem, "--out", first); code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	code, out, errs := runSolve(t, "--problem", talkProblem, "--previous", first, "--churn-ms", "50")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s optimize.Solution
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	// Same problem, anchored on its own optimum: nothing moves.
	if s.WeightChurn > 1e-9 || s.ChurnCostMs > 1e-9 {
		t.Errorf("re-solve moved: churn %v cost %v", s.WeightChurn, s.ChurnCostMs)
	}
}

func TestSolveRejectsMalformedProblems(t *testing.T) {
	good, err := os.ReadFile(talkProblem)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string { return strings.Replace(string(good), old, new, 1) }
	cases := []struct{ name, body, want string }{
		{"bad JSON", `{"clusters": [`, "bad JSON"},
		{"negative number", edit(`"demand_rps": 90`, `"demand_rps": -90`), "negative"},
		{"unknown engine", edit(`"eng-c": 80`, `"eng-z": 80`), `unknown engine "eng-z"`},
		{"duplicate names", edit(`"name": "eng-c"`, `"name": "eng-a"`), `duplicate engine name "eng-a"`},
		{"max_utilization 1.2", edit(`"max_utilization": 0.95`, `"max_utilization": 1.2`), "max_utilization is 1.2"},
		{"no engines", `{"max_utilization": 0.9, "shed_penalty_ms": 1, "clusters": [{"name": "a", "demand_rps": 1}], "engines": []}`, "no engines"},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errs := runSolve(t, "--problem", path)
			if code != 2 || out != "" {
				t.Fatalf("exit %d, stdout %q", code, out)
			}
			if !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("stderr %q: want one line containing %q", errs, tc.want)
			}
		})
	}
}

func TestSolveUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--problem", filepath.Join(t.TempDir(), "missing.json")},
		{"--problem", talkProblem, "--churn-ms", "-1"},
		{"--problem", talkProblem, "--previous", talkProblem}, // a problem is not a solution
	} {
		code, _, errs := runSolve(t, args...)
		if code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestSolveClassesProblem: `ilb solve` takes demands per (cluster, model,
// band) and engines' models and context limits (solver/optimize
// README, Request classes): each row's weights name only engines serving
// its model that accept its band, and every row is served in full.
func TestSolveClassesProblem(t *testing.T) {
	path := "../../solver/optimize/testdata/classes.json"
	code, out, errs := runSolve(t, "--problem", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s optimize.Solution
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p optimize.Problem
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	engines := map[string]optimize.Engine{}
	for _, e := range p.Engines {
		engines[e.Name] = e
	}
	if len(s.Weights) != len(p.Demands) {
		t.Fatalf("%d rows in the solution, want one per demand (%d): %v", len(s.Weights), len(p.Demands), s.Weights)
	}
	for row, w := range s.Weights {
		parts := strings.Split(row, "/") // CLUSTER/MODEL[/MIN-MAX]
		model, long := parts[1], len(parts) == 3 && strings.HasSuffix(parts[2], "-inf")
		sum := s.ShedFraction[row]
		for e, v := range w {
			eng := engines[e]
			if v > 1e-9 && (!slices.Contains(eng.Models, model) || long && eng.MaxContextTokens != 0) {
				t.Errorf("row %s sends %.3f to %s (models %v, max_context_tokens %d)", row, v, e, eng.Models, eng.MaxContextTokens)
			}
			sum += v
		}
		if sum < 0.999 || sum > 1.001 || s.ShedFraction[row] > 1e-9 {
			t.Errorf("row %s: weights and shed sum to %.4f, shed %.4f", row, sum, s.ShedFraction[row])
		}
	}
}
