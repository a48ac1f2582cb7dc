package main

import "context"

func cmdDataplane(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "dataplane", "[flags]", "Not built yet (issue #4).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("dataplane", 4)
}
