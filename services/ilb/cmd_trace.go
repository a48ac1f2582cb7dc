package main

import "context"

func cmdTrace(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "trace", "[flags]", "Not built yet (issue #7).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("trace", 7)
}
