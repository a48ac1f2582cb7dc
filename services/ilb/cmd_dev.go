package main

import "context"

func cmdDev(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "dev", "[flags]", "Not built yet (issue #6).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("dev", 6)
}
