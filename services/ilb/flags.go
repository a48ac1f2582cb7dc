package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlags returns a flag set for subcommand name whose usage text starts
// with synopsis and an explanation, then lists the flags.
func newFlags(e *env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("ilb "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: ilb %s %s\n\n%s\n\nFlags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; --help prints the usage to stdout and returns
// errHelpShown, bad flags return a usage error (exit status 2).
func parseFlags(fs *flag.FlagSet, e *env, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return errHelpShown
		}
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelpShown
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return badInput("unexpected argument %q (flags start with --; see ilb %s --help)", fs.Arg(0), fs.Name()[4:])
	}
	return nil
}

// notBuilt is returned by subcommands whose service has not landed yet, so
// a user learns which issue tracks it instead of seeing a silent no-op.
func notBuilt(name string, issue int) error {
	return fmt.Errorf("not built yet: `ilb %s` lands with issue #%d (see README, Status)", name, issue)
}
