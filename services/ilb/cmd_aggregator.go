package main

import "context"

func cmdAggregator(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "aggregator", "[flags]", "Not built yet (issue #5).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("aggregator", 5)
}
