package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
)

// command is one subcommand of ilb.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands lists every subcommand in the order --help shows them.
func commands() []command {
	return []command{
		{"dev", "the whole local fleet in one process: brokers, engines, aggregator, optimizer, data planes, traffic, live page", cmdDev},
		{"brokers", "embedded Kafka-protocol broker and NATS JetStream server only", cmdBrokers},
		{"engine-sim", "simulated GPU engines from a fleet file, publishing signals to Kafka", cmdEngineSim},
		{"adapter", "scrape real engines' Prometheus metrics (vLLM, SGLang) and publish signals", cmdAdapter},
		{"aggregator", "signals -> windowed features and latency profiles (Arrow)", cmdAggregator},
		{"optimizer", "features and profiles -> solved weights -> versioned snapshots on JetStream KV", cmdOptimizer},
		{"dataplane", "one front-end cluster's data plane: snapshot cache, picker, guardrails, proxy", cmdDataplane},
		{"weights", "inspect and roll back weight snapshots (history, rollback)", cmdWeights},
		{"record", "record Kafka topics to an Arrow IPC file", cmdRecord},
		{"replay", "replay a recording back into Kafka, event time preserved", cmdReplay},
		{"backtest", "replay a request trace over a fleet under routing policies, in virtual time", cmdBacktest},
		{"trace", "convert request traces between formats (trace convert)", cmdTrace},
		{"solve", "solve one allocation problem (JSON) and print the solution", cmdSolve},
		{"healthcheck", "GET a health URL and exit 0 on 2xx (for container health checks)", cmdHealthcheck},
	}
}

func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "ilb routes LLM inference requests across a fleet of GPU engines.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: ilb <command> [flags]     (ilb <command> --help for its flags)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Start here: ilb dev   (then open http://127.0.0.1:8080/)")
}
