package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
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

func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer bad.Close()
	if code, out, _ := run(t, "healthcheck", "--url", ok.URL); code != 0 || !strings.Contains(out, "healthy") {
		t.Fatalf("healthy server: exit %d %q", code, out)
	}
	if code, _, errs := run(t, "healthcheck", "--url", bad.URL); code != 1 || !strings.Contains(errs, "503") {
		t.Fatalf("unhealthy server: exit %d %q", code, errs)
	}
}
