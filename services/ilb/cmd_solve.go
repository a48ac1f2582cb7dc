package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ilb-router/ilb/solver/optimize"
)

func cmdSolve(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "solve", "--problem FILE [--out FILE] [flags]",
		"Solves one allocation problem (JSON, see DESIGN.md) for the traffic split that minimises mean\n"+
			"end-to-end latency, and prints the solution as JSON: weights, shed fractions, engine loads, and a\n"+
			"certificate of optimality (lower_bound_ms, gap, kkt_residual_ms). Malformed problems exit with\n"+
			"status 2 and a one-line reason.\n\n"+
			"Models and request classes: engines may list \"models\" and \"max_context_tokens\", and the\n"+
			"problem may give \"demands\": [{\"cluster\", \"model\", \"min_prompt_tokens\"?, \"max_prompt_tokens\"?,\n"+
			"\"demand_rps\"}]; each demand is solved as its own row CLUSTER/CLASS over the engines that serve it,\n"+
			"sharing their capacity (solver/optimize/README.md, Request classes).\n\n"+
			"Example: ilb solve --problem solver/optimize/testdata/talk.json\n"+
			"         ilb solve --problem solver/optimize/testdata/classes.json")
	problem := fs.String("problem", "", "problem JSON file (- reads stdin)")
	out := fs.String("out", "", "write the solution to this file instead of stdout")
	previous := fs.String("previous", "", "a previous solution (JSON) to warm-start from and, with --churn-ms, to stay near")
	churn := fs.Float64("churn-ms", 0, "price of moving all of a cluster's traffic, ms per request (needs --previous; 0: exact optimum)")
	tolerance := fs.Float64("tolerance", optimize.DefaultOptions().Tolerance, "relative duality gap at which to stop")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *problem == "" {
		return badInput("--problem is required (see ilb solve --help)")
	}
	opt := optimize.DefaultOptions()
	opt.ChurnMs, opt.Tolerance = *churn, *tolerance
	if err := opt.Validate(); err != nil {
		return badInput("%v", err)
	}
	p, err := readProblem(*problem)
	if err != nil {
		return err
	}
	if *previous != "" {
		if opt.Previous, err = readSolution(*previous); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	sol, err := optimize.Solve(p, opt)
	if err != nil {
		return badInput("%v", err)
	}
	sol.SolveMs = float64(time.Since(start).Microseconds()) / 1000
	return writeSolution(e.stdout, *out, sol)
}

func readProblem(path string) (*optimize.Problem, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, badInput("read problem: %v", err)
	}
	p, err := optimize.ParseProblem(data)
	if err != nil {
		return nil, badInput("%s: %v", path, err)
	}
	return p, nil
}

func readSolution(path string) (*optimize.Solution, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, badInput("read previous solution: %v", err)
	}
	var s optimize.Solution
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, badInput("%s: not a solution: %v", path, err)
	}
	return &s, nil
}

func writeSolution(stdout io.Writer, path string, sol *optimize.Solution) error {
	data, err := json.MarshalIndent(sol, "", "  ")
	if err != nil {
		return fmt.Errorf("encode solution: %w", err)
	}
	data = append(data, '\n')
	if path == "" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write solution: %w", err)
	}
	return nil
}
