package main

import "context"

func cmdAdapter(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "adapter", "[flags]", "Not built yet (issue #5).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("adapter", 5)
}
