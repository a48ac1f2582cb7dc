package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ilb-router/ilb/streams/embedded"
)

const brokersAbout = `Runs only the embedded brokers: a Kafka-protocol broker and a NATS server
with JetStream, on real TCP ports, so ilb's services (and kcat, the nats CLI)
can run as separate processes on this machine. Runs until interrupted.

Without --data-dir all state is lost on exit; with it, JetStream (the weights
bucket and its history) and the Kafka log survive a restart. An empty
--kafka-listen or --nats-listen leaves that broker out.

--nats-cluster N runs N NATS nodes clustered on loopback (client ports from
--nats-listen's upwards, route ports from --nats-cluster-listen's upwards),
so buckets can be replicated (ilb optimizer --bucket-replicas 3). For one
node per process or machine, run --nats-cluster 1 on each with a unique
--nats-name and --nats-routes naming the others' route ports. A cluster
fsyncs every write (--sync-always) unless told --sync-always=false.`

func cmdBrokers(ctx context.Context, e *env, args []string) error {
	cfg := embedded.DefaultConfig()
	fs := newFlags(e, "brokers", "[--kafka-listen ADDR] [--nats-listen ADDR] [--data-dir DIR]", brokersAbout)
	fs.StringVar(&cfg.KafkaListen, "kafka-listen", cfg.KafkaListen, "host:port of the Kafka-protocol broker (port 0: any free port)")
	fs.StringVar(&cfg.KafkaAdvertiseHost, "kafka-advertise-host", "", "host the Kafka broker tells clients to connect to (default: the listen host, or 127.0.0.1 for all interfaces)")
	fs.StringVar(&cfg.NATSListen, "nats-listen", cfg.NATSListen, "host:port of the NATS server (port 0: any free port)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory keeping broker state across restarts (default: none, state in memory)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the pre-created topics ilb.signals, ilb.signals.dlq, ilb.features, ilb.profiles")
	fs.BoolVar(&cfg.SyncAlways, "sync-always", false, "fsync every write (no acknowledged write lost on a machine crash; slower); default on in a NATS cluster")
	addNATSClusterFlags(fs, &cfg)
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "longest wait for the brokers to stop")
	level := fs.String("log-level", "warn", "broker log level: debug, info, warn or error (to stderr)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return badInput("--log-level %q: want debug, info, warn or error", *level)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv}))
	syncClusters(fs, &cfg)
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	b, err := embedded.Start(ctx, cfg)
	if err != nil {
		return err
	}
	printBrokers(e.stdout, b, cfg.DataDir)
	return b.Run(ctx)
}

// printBrokers tells the user where the brokers are and how to look at
// them.
func printBrokers(w io.Writer, b *embedded.Brokers, dataDir string) {
	if addrs := b.KafkaAddrs(); len(addrs) > 0 {
		fmt.Fprintf(w, "kafka: %s\n", addrs[0])
	}
	if url := b.NATSURL(); url != "" {
		fmt.Fprintf(w, "nats: %s\n", url)
	}
	if urls := b.NATSURLs(); len(urls) > 1 {
		fmt.Fprintf(w, "nats cluster: %d nodes\n", len(urls))
	}
	if dataDir != "" {
		fmt.Fprintf(w, "data: %s (kept across restarts)\n", dataDir)
	} else {
		fmt.Fprintln(w, "data: in memory (lost on exit; --data-dir keeps it)")
	}
	if addrs := b.KafkaAddrs(); len(addrs) > 0 {
		fmt.Fprintf(w, "try:  kcat -b %s -L\n", addrs[0])
	}
	if url := b.NATSURL(); url != "" {
		fmt.Fprintf(w, "try:  nats --server %s kv ls\n", url)
	}
	if len(b.NATSURLs()) > 1 {
		fmt.Fprintf(w, "try:  nats --server %s server report jetstream\n", b.NATSURL())
	}
	fmt.Fprintln(w, "ready; Ctrl-C stops")
}
