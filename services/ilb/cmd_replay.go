package main

import "context"

func cmdReplay(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "replay", "[flags]", "Not built yet (issue #7).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("replay", 7)
}
