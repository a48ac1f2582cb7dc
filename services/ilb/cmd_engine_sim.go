package main

import "context"

func cmdEngineSim(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "engine-sim", "[flags]", "Not built yet (issue #5).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("engine-sim", 5)
}
