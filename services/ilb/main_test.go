package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpListsEverySubcommand(t *testing.T) {
	code, out, _ := run(t, "--help")
	if code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	// The subcommands DESIGN.md names are a public interface.
	for _, name := range []string{"dev", "brokers", "engine-sim", "aggregator", "optimizer",
		"dataplane", "record", "replay", "backtest", "solve"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("--help does not list %q:\n%s", name, out)
		}
	}
}

func TestUnknownCommandExits2(t *testing.T) {
	code, _, errs := run(t, "frobnicate")
	if code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Fatalf("got %d %q", code, errs)
	}
}

func TestEverySubcommandHasHelp(t *testing.T) {
	for _, c := range commands() {
		code, out, errs := run(t, c.name, "--help")
		if code != 0 || !strings.Contains(out, "Usage: ilb "+c.name) {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", c.name, code, out, errs)
		}
	}
}

func TestBadFlagExits2(t *testing.T) {
	code, _, errs := run(t, "solve", "--no-such-flag")
	if code != 2 || errs == "" {
		t.Fatalf("bad flag: exit %d, stderr %q", code, errs)
	}
}
