package main

import "context"

func cmdSolve(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "solve", "[flags]", "Not built yet (issue #3).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("solve", 3)
}
