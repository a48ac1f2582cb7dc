package recorder_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/recorder"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testRecords makes n records over 3 partitions with keys (some nil),
// values (some nil or empty), 0-2 headers and timestamps 10 ms apart.
func testRecords(topic string, n int) []*kgo.Record {
	base := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	out := make([]*kgo.Record, n)
	for i := range out {
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(i % 3),
			Timestamp: base.Add(time.Duration(i) * 10 * time.Millisecond),
			Key:       []byte(fmt.Sprintf("engine-%d", i%5)),
			Value:     []byte(fmt.Sprintf("value %d", i)),
		}
		switch i % 7 {
		case 3:
			r.Key = nil
		case 4:
			r.Value = nil
		case 5:
			r.Value = []byte{}
		}
		for h := range i % 3 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprintf("h%d", h), Value: []byte{byte(i), byte(h)}})
		}
		out[i] = r
	}
	return out
}

func produce(t *testing.T, addrs []string, recs []*kgo.Record) {
	t.Helper()
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctxTimeout(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAll reads n records of topic from the start.
func consumeAll(t *testing.T, addrs []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxTimeout(t, 15*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s", len(out), n, topic)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// sig is what a replay must keep of a record.
type sig struct {
	partition int32
	ts        int64
	key, val  string
	keyNil    bool
	valNil    bool
	headers   string
}

func sigOf(r *kgo.Record) sig {
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, fmt.Sprintf("%s=%x", h.Key, h.Value))
	}
	return sig{r.Partition, r.Timestamp.UnixNano(), string(r.Key), string(r.Value), r.Key == nil, r.Value == nil, strings.Join(hs, ",")}
}

// byPartition groups signatures by partition, in order.
func byPartition(recs []*kgo.Record) map[int32][]sig {
	m := map[int32][]sig{}
	for _, r := range recs {
		m[r.Partition] = append(m[r.Partition], sigOf(r))
	}
	return m
}

func recordConfig(addrs []string, out string) recorder.RecordConfig {
	cfg := recorder.DefaultRecordConfig(out)
	cfg.Kafka = kafka.DefaultClientConfig()
	cfg.Kafka.Brokers = addrs
	cfg.FromStart = true
	cfg.FlushRecords = 64
	cfg.FlushInterval = 100 * time.Millisecond
	return cfg
}

func TestRecordReplayRoundTrip(t *testing.T) {
	src := streamstest.Kafka(t, schemas.TopicSignals)
	want := testRecords(schemas.TopicSignals, 300)
	produce(t, src, want)

	out := filepath.Join(t.TempDir(), "signals.arrow")
	cfg := recordConfig(src, out)
	cfg.MaxRecords = int64(len(want))
	var progress bytes.Buffer
	cfg.Progress, cfg.ProgressInterval = &progress, time.Millisecond
	st, err := recorder.Record(ctxTimeout(t, 20*time.Second), cfg)
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	if st.Records != 300 || st.Batches < 300/64 {
		t.Fatalf("stats %+v, want 300 records in at least %d batches", st, 300/64)
	}
	if !strings.Contains(progress.String(), "done: 300 records") {
		t.Errorf("progress output %q lacks the summary", progress.String())
	}
	if _, err := os.Stat(out + arrowipc.PartialSuffix); !os.IsNotExist(err) {
		t.Errorf("partial file left behind: %v", err)
	}
	checkArrowReadable(t, out, 300)

	dst := streamstest.Kafka(t, schemas.TopicSignals)
	rst, err := recorder.ReplayTo(ctxTimeout(t, 20*time.Second), dst, out)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if rst.Records != 300 || rst.Span != 299*10*time.Millisecond {
		t.Fatalf("replay stats %+v", rst)
	}
	got := byPartition(consumeAll(t, dst, schemas.TopicSignals, 300))
	exp := byPartition(want)
	for p := range int32(3) {
		if !slices.Equal(got[p], exp[p]) {
			t.Errorf("partition %d: replayed %d records, want %d; first got %+v want %+v",
				p, len(got[p]), len(exp[p]), first(got[p]), first(exp[p]))
		}
	}
}

func first(s []sig) sig {
	if len(s) == 0 {
		return sig{}
	}
	return s[0]
}

// checkArrowReadable opens the recording with arrow-go's own file reader,
// as another Arrow tool would, and counts its rows.
func checkArrowReadable(t *testing.T, path string, rows int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatalf("arrow ipc reader: %v", err)
	}
	var n int64
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		n += rec.NumRows()
	}
	r.Close()
	if n != rows {
		t.Errorf("arrow reader sees %d rows, want %d", n, rows)
	}
	if !r.Schema().Equal(recorder.RecordingSchema) {
		t.Errorf("schema %v, want %v", r.Schema(), recorder.RecordingSchema)
	}
	mem.AssertSize(t, 0)
}

func TestRecordFromEndSkipsOldRecords(t *testing.T) {
	src := streamstest.Kafka(t, schemas.TopicSignals)
	produce(t, src, testRecords(schemas.TopicSignals, 30))

	out := filepath.Join(t.TempDir(), "new.arrow")
	cfg := recordConfig(src, out)
	cfg.FromStart = false
	cfg.MaxRecords = 5
	done := make(chan error, 1)
	go func() {
		_, err := recorder.Record(ctxTimeout(t, 20*time.Second), cfg)
		done <- err
	}()
	cl := client(t, src)
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("record: %v", err)
			}
			recs, err := recorder.ReadRecording(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if !strings.HasPrefix(string(r.Value), "new ") {
					t.Errorf("recorded %q, produced before the recorder started", r.Value)
				}
			}
			if len(recs) != 5 {
				t.Errorf("recorded %d records, want 5", len(recs))
			}
			return
		case <-time.After(20 * time.Millisecond):
			r := &kgo.Record{Topic: schemas.TopicSignals, Value: []byte(fmt.Sprintf("new %d", i))}
			if err := cl.ProduceSync(ctxTimeout(t, 5*time.Second), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestRecordDurationStopsEmpty(t *testing.T) {
	src := streamstest.Kafka(t, schemas.TopicSignals)
	out := filepath.Join(t.TempDir(), "empty.arrow")
	cfg := recordConfig(src, out)
	cfg.Duration = 300 * time.Millisecond
	start := time.Now()
	st, err := recorder.Record(ctxTimeout(t, 20*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 10*time.Second {
		t.Errorf("stopped after %v, want about 300ms", el)
	}
	recs, err := recorder.ReadRecording(out)
	if err != nil || len(recs) != 0 || st.Records != 0 {
		t.Fatalf("empty recording: %d records, stats %+v, err %v", len(recs), st, err)
	}
}

// writeRecording records recs straight into a file through a broker.
func writeRecording(t *testing.T, recs []*kgo.Record) string {
	t.Helper()
	src := streamstest.Kafka(t, recs[0].Topic)
	produce(t, src, recs)
	out := filepath.Join(t.TempDir(), "rec.arrow")
	cfg := recordConfig(src, out)
	cfg.Topics = []string{recs[0].Topic}
	cfg.MaxRecords = int64(len(recs))
	if _, err := recorder.Record(ctxTimeout(t, 20*time.Second), cfg); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReplayPacingAndTopicMap(t *testing.T) {
	recs := testRecords("ilb.recorded", 12)
	// Gaps of 10 ms, and one record 50 ms behind (out of order).
	recs[6].Timestamp = recs[6].Timestamp.Add(-50 * time.Millisecond)
	path := writeRecording(t, recs)

	dst := streamstest.Kafka(t, "ilb.replayed")
	cfg := recorder.DefaultReplayConfig(path)
	cfg.Kafka.Brokers = dst
	cfg.Speed = 2
	cfg.TopicMap = map[string]string{"ilb.recorded": "ilb.replayed"}
	clock := time.Unix(1000, 0)
	var slept []time.Duration
	cfg.Now = func() time.Time { return clock }
	cfg.Sleep = func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		clock = clock.Add(d)
		return nil
	}
	st, err := recorder.Replay(ctxTimeout(t, 20*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The clock follows the largest timestamp seen, from the first
	// recorded record's, at half speed; an out-of-order record never
	// makes it wait or go back.
	rec, err := recorder.ReadRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	latest := rec[0].Timestamp
	for _, r := range rec {
		if r.Timestamp.After(latest) {
			latest = r.Timestamp
		}
	}
	var total time.Duration
	for _, d := range slept {
		total += d
		if d <= 0 {
			t.Errorf("non-positive wait %v", d)
		}
	}
	if want := latest.Sub(rec[0].Timestamp) / 2; total != want || len(slept) == 0 {
		t.Errorf("slept %v (total %v), want %v in all", slept, total, want)
	}
	if st.Records != 12 {
		t.Errorf("replayed %d records", st.Records)
	}
	got := consumeAll(t, dst, "ilb.replayed", 12)
	if len(got) != 12 {
		t.Errorf("topic map: %d records on ilb.replayed", len(got))
	}
}

func TestReplayCancelled(t *testing.T) {
	path := writeRecording(t, testRecords("ilb.signals", 5))
	dst := streamstest.Kafka(t, schemas.TopicSignals)
	cfg := recorder.DefaultReplayConfig(path)
	cfg.Kafka.Brokers = dst
	ctx, cancel := context.WithCancel(t.Context())
	cfg.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	_, err := recorder.Replay(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("replay after cancel: %v", err)
	}
}

func TestReadRecordingBadFiles(t *testing.T) {
	good := writeRecording(t, testRecords("ilb.signals", 20))
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	featuresFile := filepath.Join(dir, "features.arrow")
	rec := schemas.FeaturesToRecord(nil, []schemas.Feature{{Engine: "e"}})
	if err := arrowipc.WriteFile(featuresFile, schemas.FeatureSchema, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	cases := map[string][]byte{
		"garbage":   []byte("this is not an arrow file at all"),
		"truncated": data[:len(data)/2],
		"empty":     {},
	}
	for name, b := range cases {
		path := filepath.Join(dir, name+".arrow")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := recorder.ReadRecording(path)
		if !errors.Is(err, recorder.ErrFormat) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err %v, want ErrFormat naming the file", name, err)
		}
	}
	_, err = recorder.ReadRecording(featuresFile)
	if !errors.Is(err, recorder.ErrFormat) || !strings.Contains(err.Error(), "recording/v1") {
		t.Errorf("feature table as recording: %v", err)
	}
	if _, err := recorder.ReadRecording(filepath.Join(dir, "missing.arrow")); err == nil {
		t.Error("missing file: no error")
	}
}

// TestReadPartialRecording reads what a killed recorder leaves: the
// complete batches of a file without footer, the last one cut.
func TestReadPartialRecording(t *testing.T) {
	good := writeRecording(t, testRecords("ilb.signals", 200)) // 64-record batches
	want, err := recorder.ReadRecording(good)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(good)
	// Drop the footer and cut into the last batch: what a crash leaves.
	cut := filepath.Join(t.TempDir(), "cut.arrow"+arrowipc.PartialSuffix)
	if err := os.WriteFile(cut, data[:len(data)*3/4], 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := recorder.ReadRecording(cut)
	if err != nil {
		t.Fatalf("partial: %v", err)
	}
	if len(got) == 0 || len(got) >= len(want) || len(got)%64 != 0 {
		t.Fatalf("partial file gave %d records of %d; want whole batches, fewer than all", len(got), len(want))
	}
	for i := range got {
		if sigOf(got[i]) != sigOf(want[i]) {
			t.Fatalf("record %d differs: %+v vs %+v", i, sigOf(got[i]), sigOf(want[i]))
		}
	}
}

func TestConfigValidate(t *testing.T) {
	rc := recorder.DefaultRecordConfig("x.arrow")
	bad := map[string]func(*recorder.RecordConfig){
		"no topic":    func(c *recorder.RecordConfig) { c.Topics = nil },
		"bad topic":   func(c *recorder.RecordConfig) { c.Topics = []string{"a b"} },
		"no out":      func(c *recorder.RecordConfig) { c.Out = "" },
		"neg dur":     func(c *recorder.RecordConfig) { c.Duration = -1 },
		"zero flush":  func(c *recorder.RecordConfig) { c.FlushRecords = 0 },
		"no brokers":  func(c *recorder.RecordConfig) { c.Kafka.Brokers = nil },
		"no interval": func(c *recorder.RecordConfig) { c.Progress = os.Stderr; c.ProgressInterval = 0 },
	}
	if err := rc.Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for name, mut := range bad {
		c := rc
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: validated", name)
		}
	}
	pc := recorder.DefaultReplayConfig("x.arrow")
	for name, mut := range map[string]func(*recorder.ReplayConfig){
		"neg speed": func(c *recorder.ReplayConfig) { c.Speed = -1 },
		"no in":     func(c *recorder.ReplayConfig) { c.In = "" },
		"bad map":   func(c *recorder.ReplayConfig) { c.TopicMap = map[string]string{"a": "b c"} },
	} {
		c := pc
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: validated", name)
		}
	}
}
