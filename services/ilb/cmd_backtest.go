package main

import "context"

func cmdBacktest(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "backtest", "[flags]", "Not built yet (issue #7).")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return notBuilt("backtest", 7)
}
