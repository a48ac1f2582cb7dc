package main

import "context"

func cmdOptimizer(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "optimizer", "[flags]", "Not built yet (issue #6).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("optimizer", 6)
}
