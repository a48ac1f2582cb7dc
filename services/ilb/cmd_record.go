package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/services/recorder"
)

const recordAbout = `Records Kafka topics into an Arrow IPC file: one row per record with its
topic, partition, offset, timestamp, key, value and headers (any Arrow tool
reads it; ilb replay plays it back). Runs until interrupted, --duration or
--max-records. Batches are written every --flush-records records or
--flush-interval, to FILE.partial until the recording ends, so a killed
recorder loses at most one batch (ilb replay --in FILE.partial reads it).`

func cmdRecord(ctx context.Context, e *env, args []string) error {
	cfg := recorder.DefaultRecordConfig("")
	fs := newFlags(e, "record", "--kafka ADDRS --topics T[,T..] --out FILE [flags]", recordAbout)
	kf := addKafkaFlags(fs)
	topics := fs.String("topics", strings.Join(cfg.Topics, ","), "comma-separated topics to record")
	fs.StringVar(&cfg.Out, "out", "", "recording file to write (Arrow IPC)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (0: until interrupted)")
	fs.Int64Var(&cfg.MaxRecords, "max-records", 0, "stop after this many records (0: no limit)")
	from := fs.String("from", "end", "where to start in each partition: start (oldest retained record) or end (only new records)")
	fs.IntVar(&cfg.FlushRecords, "flush-records", cfg.FlushRecords, "write a batch every this many records")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", cfg.FlushInterval, "write a batch at least this often")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "how often to print progress to stderr")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	kc, err := kf.config("ilb-record")
	if err != nil {
		return err
	}
	cfg.Kafka = kc
	cfg.Topics = commaList(*topics)
	switch *from {
	case "start":
		cfg.FromStart = true
	case "end":
	default:
		return badInput("--from %q: want start or end", *from)
	}
	cfg.Progress = e.stderr
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	st, err := recorder.Record(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "recorded %d records (%d batches) to %s\n", st.Records, st.Batches, cfg.Out)
	return nil
}

// commaList splits a comma-separated flag value (topics, topic renames),
// dropping empty items.
func commaList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
