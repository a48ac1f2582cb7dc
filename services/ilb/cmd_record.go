package main

import "context"

func cmdRecord(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "record", "[flags]", "Not built yet (issue #7).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("record", 7)
}
