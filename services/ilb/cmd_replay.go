package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/services/recorder"
)

const replayAbout = `Replays a recording made by ilb record into Kafka: every record goes to
its topic (or the one --topic-map names) with its key, value, headers,
timestamp and partition, paced by the original gaps divided by --speed
(0: as fast as possible). Signal events carry their own event time, so a
replayed stream drives the aggregator and optimizer as the live one did:
with their event clocks (the default), into fresh brokers, the optimizer
publishes the live run's weights window for window (compare with
ilb weights history, column INPUTS_AS_OF), at any --speed.
A FILE.partial left by a killed recorder is replayed up to its last
complete batch.`

func cmdReplay(ctx context.Context, e *env, args []string) error {
	cfg := recorder.DefaultReplayConfig("")
	fs := newFlags(e, "replay", "--kafka ADDRS --in FILE [--speed X] [flags]", replayAbout)
	kf := addKafkaFlags(fs)
	fs.StringVar(&cfg.In, "in", "", "recording to replay (Arrow IPC, from ilb record)")
	fs.Float64Var(&cfg.Speed, "speed", cfg.Speed, "pace: original gaps divided by this (1: real time, 0: as fast as possible)")
	topicMap := fs.String("topic-map", "", "comma-separated old=new topic renames")
	fs.BoolVar(&cfg.CreateTopics, "create-topics", cfg.CreateTopics, "create missing target topics (broker default replication)")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "how often to print progress to stderr")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	kc, err := kf.config("ilb-replay")
	if err != nil {
		return err
	}
	cfg.Kafka = kc
	if cfg.TopicMap, err = parseTopicMap(*topicMap); err != nil {
		return err
	}
	cfg.Progress = e.stderr
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	st, err := recorder.Replay(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "replayed %d records spanning %v from %s\n", st.Records, st.Span, cfg.In)
	return nil
}

func parseTopicMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, pair := range commaList(s) {
		from, to, ok := strings.Cut(pair, "=")
		if !ok || from == "" || to == "" {
			return nil, badInput("--topic-map %q: want old=new", pair)
		}
		m[from] = to
	}
	return m, nil
}
