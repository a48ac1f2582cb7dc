package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/aggregator"
	"github.com/ilb-router/ilb/services/recorder"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func recTestClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestRecordThenReplay(t *testing.T) {
	src := streamstest.Kafka(t, schemas.TopicSignals)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Topic: schemas.TopicSignals, Key: []byte(fmt.Sprintf("e%d", i%4)), Value: []byte{byte(i)},
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.SchemaSignalV1)}}})
	}
	if err := recTestClient(t, src).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rec.arrow")
	code, stdout, stderr := run(t, "record", "--kafka", src[0], "--topics", schemas.TopicSignals,
		"--out", out, "--from", "start", "--max-records", "50", "--duration", "20s")
	if code != 0 || !strings.Contains(stdout, "recorded 50 records") {
		t.Fatalf("record: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	dst := streamstest.Kafka(t, schemas.TopicSignals)
	code, stdout, stderr = run(t, "replay", "--kafka", dst[0], "--in", out, "--speed", "0")
	if code != 0 || !strings.Contains(stdout, "replayed 50 records") {
		t.Fatalf("replay: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	cl := recTestClient(t, dst, kgo.ConsumeTopics(schemas.TopicSignals), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < 50 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 50 replayed records", n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Headers) != 1 || string(r.Headers[0].Value) != schemas.SchemaSignalV1 {
				t.Errorf("record %d lost its header: %+v", r.Offset, r.Headers)
			}
			n++
		})
	}
}

func TestRecordReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.arrow")
	if err := os.WriteFile(garbage, []byte("not arrow"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"record", "--out", filepath.Join(dir, "x.arrow"), "--from", "middle"}, 2, "--from"},
		{[]string{"record", "--topics", "ilb.signals"}, 2, "no output file"},
		{[]string{"record", "--kafka", "nohost", "--out", "x"}, 2, "nohost"},
		{[]string{"replay", "--in", garbage, "--kafka", "127.0.0.1:1"}, 1, "not a valid recording"},
		{[]string{"replay", "--in", garbage, "--speed", "-1"}, 2, "speed"},
		{[]string{"replay", "--in", garbage, "--topic-map", "a"}, 2, "old=new"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}

// TestReplayedSignalsDriveAggregatorAsLive records a signal stream,
// replays it into a fresh broker, and checks that the aggregator
// publishes the same windows from the replay as from the live stream.
func TestReplayedSignalsDriveAggregatorAsLive(t *testing.T) {
	live := streamstest.Kafka(t, schemas.TopicSignals)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	t0 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC).UnixNano()
	var recs []*kgo.Record
	for i := range 300 {
		engine := fmt.Sprintf("eng-%d", i%5)
		tNs := t0 + int64(i)*int64(20*time.Millisecond)
		if i%17 == 0 {
			tNs -= int64(1500 * time.Millisecond) // late
		}
		recs = append(recs, signalRecord(t, engine, tNs, float64(50+i%40)))
	}
	for e := range 5 {
		recs = append(recs, signalRecord(t, fmt.Sprintf("eng-%d", e), t0+int64(30*time.Second), 1))
	}
	if err := recTestClient(t, live).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "signals.arrow")
	rc := recorder.DefaultRecordConfig(out)
	rc.Kafka.Brokers, rc.FromStart, rc.MaxRecords = live, true, int64(len(recs))
	if _, err := recorder.Record(ctx, rc); err != nil {
		t.Fatal(err)
	}
	want := aggregateWindows(t, live)

	replayed := streamstest.Kafka(t, schemas.TopicSignals)
	if _, err := recorder.ReplayTo(ctx, replayed, out); err != nil {
		t.Fatal(err)
	}
	got := aggregateWindows(t, replayed)
	if len(want) < 10 || !reflect.DeepEqual(got, want) {
		t.Errorf("replay gave %d windows, live %d; or their rows differ", len(got), len(want))
	}
}

func signalRecord(t *testing.T, engine string, tNs int64, ttft float64) *kgo.Record {
	t.Helper()
	ev := schemas.Event{Kind: schemas.KindCompletion, Completion: schemas.Completion{
		Engine: engine, Cluster: "fe-a", TimeUnixNano: tNs, PromptTokens: 10, OutputTokens: 5, TTFTMs: ttft, TBOTMs: 10}}
	b, err := schemas.AppendEvent(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: schemas.TopicSignals, Key: []byte(engine), Value: b,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.SchemaSignalV1)}}}
}

// aggregateWindows runs an aggregator on the broker until its feature
// output settles, and returns the rows by window id.
func aggregateWindows(t *testing.T, addrs []string) map[string][]schemas.Feature {
	t.Helper()
	cfg := aggregator.DefaultConfig()
	cfg.Kafka.Brokers = addrs
	cfg.Window, cfg.OutOfOrder, cfg.AllowedLateness = time.Second, 100*time.Millisecond, 200*time.Millisecond
	cfg.PollInterval, cfg.HeartbeatInterval, cfg.SessionTimeout = 20*time.Millisecond, 100*time.Millisecond, 6*time.Second
	a, err := aggregator.New(cfg, aggregator.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("aggregator: %v", err)
		}
	}()
	cl := recTestClient(t, addrs, kgo.ConsumeTopics(schemas.TopicFeatures), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := map[string][]schemas.Feature{}
	quiet := time.Now()
	for deadline := time.Now().Add(30 * time.Second); len(out) == 0 || time.Since(quiet) < time.Second; {
		if time.Now().After(deadline) {
			t.Fatalf("features did not settle: %d windows", len(out))
		}
		pctx, pcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			quiet = time.Now()
			batches, _, err := arrowipc.DecodeStream(r.Value, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := schemas.FeaturesFromRecord(batches[0])
			arrowipc.Release(batches)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range r.Headers {
				if h.Key == aggregator.HeaderWindow {
					out[string(h.Value)] = rows
				}
			}
		})
	}
	return out
}
