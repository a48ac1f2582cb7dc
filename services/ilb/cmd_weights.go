package main

import "context"

func cmdWeights(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "weights", "[flags]", "Not built yet (issue #6).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("weights", 6)
}
