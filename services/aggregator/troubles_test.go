package aggregator

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// testClock is a settable wall clock for Deps.Now.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestTroublesRateLimitWarnings: a hundred failures of one kind within
// troubleLogEvery give one warning; the next after it gives one more that
// counts the hundred; another error text is warned about at once; the
// trouble counts as persistent only once it has recurred for
// troublePersist; a success ends it with an Info line.
func TestTroublesRateLimitWarnings(t *testing.T) {
	var sink streamstest.LogBuffer
	ts := newTroubles(slog.New(slog.NewTextHandler(&sink, nil)), "g")
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	refused := errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")
	for i := range 100 {
		ts.failed(t0.Add(time.Duration(i)*90*time.Millisecond), troubleGroup, refused)
	}
	if got := sink.Lines(regexp.MustCompile(`level=WARN .*consumer group failing`)); len(got) != 1 || !strings.Contains(got[0], "connection refused") {
		t.Fatalf("100 failures in 9 s gave warnings %q, want one naming the error", got)
	}
	if ts.persistent(t0.Add(9 * time.Second)) {
		t.Fatal("persistent before troublePersist")
	}
	ts.failed(t0.Add(troubleLogEvery), troubleGroup, refused)
	got := sink.Lines(regexp.MustCompile(`level=WARN .*consumer group failing`))
	if len(got) != 2 || !strings.Contains(got[1], "times=100") {
		t.Fatalf("warnings %q: want a second one after %v counting 100 failures since the first", got, troubleLogEvery)
	}
	if !ts.persistent(t0.Add(troublePersist)) {
		t.Fatal("a failure recurring for troublePersist is not persistent")
	}
	if ts.persistent(t0.Add(troublePersist + troubleLogEvery + time.Second)) {
		t.Fatal("a failure not seen for longer than troubleLogEvery still counts as going on")
	}
	ts.failed(t0.Add(troubleLogEvery), troubleCommit, errors.New("NOT_COORDINATOR"))
	if n := len(sink.Lines(regexp.MustCompile(`level=WARN .*commit failing`))); n != 1 {
		t.Fatalf("a new kind gave %d warnings, want 1 at once", n)
	}
	ts.outcome(t0.Add(11*time.Second), troubleCommit, nil)
	if n := len(sink.Lines(regexp.MustCompile(`level=INFO .*commit working again`))); n != 1 || len(ts.kinds) != 1 {
		t.Fatalf("after a successful commit: %d info lines, %d troubles left; want 1 and 1", n, len(ts.kinds))
	}
	for i := range 3 * maxTroubles {
		ts.failed(t0, troubleFetch, fmt.Errorf("partition %d: OFFSET_OUT_OF_RANGE", i))
	}
	if len(ts.kinds) > maxTroubles {
		t.Fatalf("%d troubles remembered, want at most %d", len(ts.kinds), maxTroubles)
	}
}

// TestConsumerWarnsWhenBrokerStops: the broker of a running aggregator
// stops. The consumer group's failure is logged at Warn with franz-go's
// error, once (not on every 20 ms poll) until troubleLogEvery has
// passed; once it has recurred for troublePersist /healthz reports the
// consumer unready; when the broker is back and the group rejoined it is
// ready again.
func TestConsumerWarnsWhenBrokerStops(t *testing.T) {
	k := streamstest.NewKafkaServer(t, "", schemas.TopicSignals, schemas.TopicSignalsDLQ, schemas.TopicFeatures, TopicProfiles)
	var sink streamstest.LogBuffer
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := start(t, testConfig(k.Addrs(), "g-stop"), Deps{Logger: slog.New(slog.NewTextHandler(&sink, nil)), Now: clock.Now})
	ready := func() bool { st, _ := r.a.Health().Status(); return st["consumer"] }
	waitFor(t, 20*time.Second, "the consumer in its group", ready)

	k.Stop()
	warned := regexp.MustCompile(`level=WARN .*consumer group failing`)
	waitFor(t, 20*time.Second, "a warning about the group", func() bool { return len(sink.Lines(warned)) > 0 })
	if l := sink.Lines(warned)[0]; !strings.Contains(l, "connection refused") || !strings.Contains(l, "hint=") {
		t.Fatalf("warning %q does not carry the error and a hint", l)
	}
	time.Sleep(time.Second) // 50 polls; franz-go reports the failed rejoin again meanwhile
	if n := len(sink.Lines(warned)); n != 1 {
		t.Fatalf("%d warnings within troubleLogEvery, want 1:\n%s", n, sink.String())
	}
	if !ready() {
		t.Fatal("unready before the failure persisted")
	}
	clock.Advance(troublePersist)
	waitFor(t, 20*time.Second, "the consumer unready", func() bool { return !ready() })
	// Out of the group first, perhaps; the persistent failure then names
	// its cause.
	waitFor(t, 20*time.Second, "/healthz naming the failure", func() bool {
		return strings.Contains(r.a.Health().Reason("consumer"), "connection refused")
	})
	if n := len(sink.Lines(warned)); n > 2 {
		t.Fatalf("%d warnings after one troubleLogEvery, want at most 2", n)
	}

	k.Restart()
	waitFor(t, 30*time.Second, "the consumer ready again", ready)
	if len(sink.Lines(regexp.MustCompile(`level=INFO .*consumer group working again`))) == 0 {
		t.Errorf("no line saying the group works again:\n%s", sink.String())
	}
}

// TestConsumerWarnsOnWrongPassword: with a wrong SASL password the
// aggregator never joins its group and franz-go reports nothing to the
// poll loop (kfake closes the connection; franz-go retries). After
// troublePersist out of the group the aggregator probes the brokers and
// warns with the error, once per troubleLogEvery however many polls; the
// consumer is unready throughout; the password is in no log line.
func TestConsumerWarnsOnWrongPassword(t *testing.T) {
	const wrong = "agg-wrong-pw-Gd3"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser(kafka.SASLScramSHA256, "ilb", "agg-right-pw"),
		kfake.SeedTopics(2, schemas.TopicSignals, schemas.TopicSignalsDLQ, schemas.TopicFeatures, TopicProfiles))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := testConfig(c.ListenAddrs(), "g-wrong")
	cfg.CreateTopics = false // it would wait PublishTimeout for nothing
	cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = kafka.SASLScramSHA256, "ilb", wrong
	var sink streamstest.LogBuffer
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := start(t, cfg, Deps{Logger: slog.New(slog.NewTextHandler(&sink, nil)), Now: clock.Now})
	ready := func() bool { st, _ := r.a.Health().Status(); return st["consumer"] }

	time.Sleep(200 * time.Millisecond) // polls out of the group, before troublePersist
	warned := regexp.MustCompile(`level=WARN .*brokers failing`)
	if n := len(sink.Lines(warned)); n != 0 || ready() {
		t.Fatalf("before troublePersist: %d warnings, ready %v; want none and unready", n, ready())
	}
	clock.Advance(troublePersist)
	waitFor(t, 10*time.Second, "a warning about the brokers", func() bool { return len(sink.Lines(warned)) > 0 })
	if l := sink.Lines(warned)[0]; !strings.Contains(l, "still not in the group") || !strings.Contains(l, "SASL") {
		t.Fatalf("warning %q does not say the member is out of the group with a hint naming SASL", l)
	}
	time.Sleep(500 * time.Millisecond) // 25 polls
	if n := len(sink.Lines(warned)); n != 1 || ready() {
		t.Fatalf("%d warnings within troubleLogEvery (want 1), ready %v", n, ready())
	}
	clock.Advance(troubleLogEvery)
	waitFor(t, 10*time.Second, "a second warning after troubleLogEvery", func() bool { return len(sink.Lines(warned)) == 2 })
	if strings.Contains(sink.String(), wrong) {
		t.Fatal("the password is in the log")
	}
}
