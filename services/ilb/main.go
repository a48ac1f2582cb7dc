// Command ilb is the one binary of ilb: each subcommand starts one service,
// the whole local fleet (`ilb dev`), or a one-shot tool (`ilb solve`,
// `ilb backtest`). Subcommands map flags to a service's Config and call its
// Run; only this package reads flags and the environment, and only main
// exits.
//
// # Concurrency
//
// main runs one subcommand; the subcommand owns its goroutines and returns
// when they have all ended.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain runs the subcommand named by args[0] and returns the exit status:
// 0 on success, 2 for bad usage or bad input, 1 for other failures.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		printUsage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := findCommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "ilb: unknown command %q; run 'ilb --help' for the list\n", args[0])
		return 2
	}
	err := cmd.run(ctx, &env{stdout: stdout, stderr: stderr}, args[1:])
	return exitCode(stderr, cmd.name, err)
}

func exitCode(stderr io.Writer, name string, err error) int {
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return 0
	case errors.Is(err, context.Canceled):
		return 0
	}
	fmt.Fprintf(stderr, "ilb %s: %v\n", name, err)
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "help" || s == "-help" }

// env is what a subcommand may touch of the process.
type env struct {
	stdout, stderr io.Writer
}

// usageError marks bad flags or bad input: exit status 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// badInput wraps err as a usage error (exit status 2).
func badInput(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

var errHelpShown = errors.New("help shown")
