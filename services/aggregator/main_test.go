package aggregator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// base is the event time of the tests' streams: a window boundary.
var base = time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC).UnixNano()

func at(sec float64) int64 { return base + int64(sec*float64(time.Second)) }

// testConfig is a config for tests: 1 s windows decided by event time
// alone (no idle timeout within a test), fast group timers.
func testConfig(addrs []string, group string) Config {
	cfg := DefaultConfig()
	cfg.Kafka = kafka.DefaultClientConfig()
	cfg.Kafka.Brokers = addrs
	cfg.Group = group
	cfg.Window, cfg.Hop = time.Second, 0
	cfg.OutOfOrder, cfg.AllowedLateness = 0, 0
	cfg.IdleTimeout = time.Hour
	cfg.PollInterval = 20 * time.Millisecond
	cfg.CommitInterval = 50 * time.Millisecond
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.SessionTimeout = 6 * time.Second // kfake's minimum
	cfg.ProfileInterval = time.Hour      // tests call Refit
	return cfg
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// running is an Aggregator's Run in its own goroutine.
type running struct {
	a      *Aggregator
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func start(t *testing.T, cfg Config, deps Deps) *running {
	t.Helper()
	a, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{a: a, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = a.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("aggregator did not stop within 20s")
	}
	if r.err != nil {
		t.Errorf("Run: %v", r.err)
	}
}

// accepted returns the events the aggregator accepted so far.
func (r *running) accepted() uint64 { return r.a.cnt.status.Load() + r.a.cnt.completion.Load() }

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func completion(engine, cluster string, tNs int64, ttft, tbot float64) schemas.Event {
	return schemas.Event{Kind: schemas.KindCompletion, Completion: schemas.Completion{
		Engine: engine, Cluster: cluster, TimeUnixNano: tNs, PromptTokens: 100, CachedPromptTokens: 25,
		OutputTokens: 10, TTFTMs: ttft, TBOTMs: tbot,
	}}
}

func status(engine string, tNs int64, running uint32) schemas.Event {
	return schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{
		Engine: engine, TimeUnixNano: tNs, Health: schemas.HealthHealthy, ReadyReplicas: 1, TotalReplicas: 1,
		Running: running, KVCacheUtilization: 0.5,
	}}
}

// signal encodes ev as an ilb.signals record on partition p.
func signal(t testing.TB, p int32, ev schemas.Event) *kgo.Record {
	t.Helper()
	b, err := schemas.AppendEvent(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	engine := ev.Status.Engine
	if ev.Kind == schemas.KindCompletion {
		engine = ev.Completion.Engine
	}
	return &kgo.Record{Topic: schemas.TopicSignals, Partition: p, Key: []byte(engine), Value: b,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSchema, Value: []byte(schemas.SchemaSignalV1)}}}
}

// producer sends records to the partitions they name.
func producer(t *testing.T, addrs []string) func(recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctxTimeout(t, 10*time.Second), recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// featureMsg is one ilb.features record, decoded.
type featureMsg struct {
	id   string // HeaderWindow
	key  string
	rows []schemas.Feature
}

// topicReader reads a topic from the start.
type topicReader struct {
	mu   sync.Mutex
	cl   *kgo.Client
	recs []*kgo.Record
}

func readTopic(t *testing.T, addrs []string, topic string) *topicReader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &topicReader{cl: cl}
}

// waitN polls until n records arrived in all, and returns them.
func (r *topicReader) waitN(t *testing.T, n int, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx := ctxTimeout(t, d)
	for len(r.recs) < n {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := r.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("got %d records, want %d", len(r.recs), n)
		}
		r.recs = append(r.recs, fs.Records()...)
	}
	return r.recs
}

// readToEnd polls until it has read every record the topic held when it
// was called (its end offsets then), failing the test after d, and returns
// all read so far. Unlike reading for a fixed time, this does not depend
// on how fast a loaded machine fetches: a record already acknowledged is
// never missed.
func (r *topicReader) readToEnd(t *testing.T, topic string, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx := ctxTimeout(t, d)
	ends, err := kadm.NewClient(r.cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{} // partition -> end offset still to reach
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	next := map[int32]int64{} // partition -> one past the last record read
	for _, rec := range r.recs {
		next[rec.Partition] = max(next[rec.Partition], rec.Offset+1)
	}
	reached := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !reached() {
		fs := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read up to offsets %v within %v, want %v", topic, next, d, want)
		}
		for _, rec := range fs.Records() {
			r.recs = append(r.recs, rec)
			next[rec.Partition] = max(next[rec.Partition], rec.Offset+1)
		}
	}
	return r.recs
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func decodeFeatures(t testing.TB, r *kgo.Record) featureMsg {
	t.Helper()
	batches, _, err := arrowipc.DecodeStream(r.Value, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("features record: %v", err)
	}
	defer arrowipc.Release(batches)
	m := featureMsg{id: header(r, HeaderWindow), key: string(r.Key)}
	for _, b := range batches {
		rows, err := schemas.FeaturesFromRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		m.rows = append(m.rows, rows...)
	}
	return m
}

// row finds the row of engine (and cluster) in a window ending at endNs.
func row(msgs []featureMsg, endNs int64, engine, cluster string) (schemas.Feature, bool) {
	for _, m := range msgs {
		for _, r := range m.rows {
			if r.WindowEndUnixNano == endNs && r.Engine == engine && r.Cluster == cluster {
				return r, true
			}
		}
	}
	return schemas.Feature{}, false
}
