package main

import "context"

func cmdBrokers(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "brokers", "[flags]", "Not built yet (issue #2).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("brokers", 2)
}
