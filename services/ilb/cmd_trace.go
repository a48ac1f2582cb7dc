package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest"
)

func cmdTrace(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprintln(e.stdout, "Usage: ilb trace convert --in FILE [--from auto|csv|mooncake|azure|lmbench] --out FILE.csv [--fleet FILE]\n\n"+
			"Converts a request trace to ilb's CSV (timestamp_ms,cluster,conversation_id,input_tokens,output_tokens,prefix_blocks),\n"+
			"giving every request a conversation id (from its leading prefix blocks when the trace has none) and, with --fleet,\n"+
			"a cluster drawn by demand share. Run ilb trace convert --help for the flags.")
		if len(args) == 0 {
			return usageError{fmt.Errorf("missing subcommand (convert)")}
		}
		return errHelpShown
	}
	if args[0] != "convert" {
		return badInput("unknown subcommand %q (want convert)", args[0])
	}
	return traceConvert(e, args[1:])
}

func traceConvert(e *env, args []string) error {
	fs := newFlags(e, "trace convert", "--in FILE --out FILE.csv [flags]",
		"Converts a Mooncake JSONL, Azure CSV or ilb CSV trace to ilb's CSV.")
	in := fs.String("in", "", "input trace file")
	from := fs.String("from", "auto", "input format: auto, csv, mooncake, azure or lmbench")
	out := fs.String("out", "", "output CSV file")
	fleetPath := fs.String("fleet", "", "fleet file: assign clusters by demand share")
	skipBad := fs.Bool("skip-bad", false, "skip and count bad lines instead of failing")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return badInput("--in and --out are required (see ilb trace convert --help)")
	}
	format, err := backtest.ParseFormat(*from)
	if err != nil {
		return badInput("--from: %v", err)
	}
	tr, err := readTrace(e, *in, format, *skipBad)
	if err != nil {
		return err
	}
	tr.AssignConversations()
	if *fleetPath != "" {
		fleet, err := schemas.LoadFleet(*fleetPath)
		if err != nil {
			return badInput("%v", err)
		}
		if err := tr.AssignClusters(fleet); err != nil {
			return badInput("%v", err)
		}
	}
	return writeCSVFile(e, *out, tr)
}

func writeCSVFile(e *env, path string, tr *backtest.Trace) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	err = backtest.WriteCSV(f, tr)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	fmt.Fprintf(e.stderr, "trace: wrote %d requests to %s\n", len(tr.Requests), path)
	return nil
}
