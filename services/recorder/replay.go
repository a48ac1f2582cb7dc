package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
)

// ReplayConfig configures Replay.
type ReplayConfig struct {
	Kafka kafka.ClientConfig
	// In is the recording. A path ending in arrowipc.PartialSuffix is read
	// as the file a killed recorder left: every complete batch is replayed.
	In string
	// Speed divides the gaps between records' original timestamps: 1
	// replays in real time, 10 ten times faster, 0 as fast as possible.
	Speed float64
	// TopicMap sends records of a recorded topic to another topic; topics
	// not in it keep their name.
	TopicMap map[string]string
	// CreateTopics creates missing target topics (broker defaults for
	// replication, as many partitions as the recording uses).
	CreateTopics bool
	// Progress receives a progress line every ProgressInterval and a
	// summary at the end; nil prints nothing.
	Progress         io.Writer
	ProgressInterval time.Duration
	Logger           *slog.Logger // nil discards
	// Now and Sleep are the clock used for pacing; nil means the wall
	// clock.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultReplayConfig replays in into the local embedded broker at
// original speed.
func DefaultReplayConfig(in string) ReplayConfig {
	return ReplayConfig{
		Kafka:            kafka.DefaultClientConfig(),
		In:               in,
		Speed:            1,
		CreateTopics:     true,
		ProgressInterval: 5 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c ReplayConfig) Validate() error {
	if err := c.Kafka.Validate(); err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	switch {
	case c.In == "":
		return errors.New("recorder: no recording to replay")
	case !(c.Speed >= 0) || math.IsInf(c.Speed, 1):
		return fmt.Errorf("recorder: speed %v must be a finite number >= 0 (0: as fast as possible)", c.Speed)
	case c.Progress != nil && c.ProgressInterval <= 0:
		return fmt.Errorf("recorder: progress interval %v must be positive", c.ProgressInterval)
	}
	for from, to := range c.TopicMap {
		if err := schemas.ValidTopicName(from); err != nil {
			return fmt.Errorf("recorder: topic map: %w", err)
		}
		if err := schemas.ValidTopicName(to); err != nil {
			return fmt.Errorf("recorder: topic map: %w", err)
		}
	}
	return nil
}

// ReplayStats describe a finished replay.
type ReplayStats struct {
	Records int64         // records produced and acknowledged
	Span    time.Duration // from the first to the last original timestamp
}

// ReplayTo replays the recording at path into the Kafka brokers as fast as
// possible, creating missing topics: what a test needs to drive services
// with a recorded stream.
func ReplayTo(ctx context.Context, brokers []string, path string) (ReplayStats, error) {
	cfg := DefaultReplayConfig(path)
	cfg.Kafka.Brokers = brokers
	cfg.Speed = 0
	return Replay(ctx, cfg)
}

// ReadRecording reads every record of a recording, in recorded order. A
// path ending in arrowipc.PartialSuffix is read as a killed recorder's
// file: the complete batches are returned.
func ReadRecording(path string) ([]*kgo.Record, error) {
	if strings.HasSuffix(path, arrowipc.PartialSuffix) {
		batches, sc, err := arrowipc.RecoverFile(path, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		if err := checkSchema(sc); err != nil {
			arrowipc.Release(batches)
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return fromBatches(path, batches)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	recs, err := DecodeRecording(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (a recording cut short by a killed recorder is read from its %s file)",
			path, err, arrowipc.PartialSuffix)
	}
	return recs, nil
}

// DecodeRecording decodes a complete recording held in memory. Any input
// that is not one gives an error wrapping ErrFormat, never a panic.
func DecodeRecording(data []byte) ([]*kgo.Record, error) {
	batches, sc, err := arrowipc.DecodeFile(data, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if err := checkSchema(sc); err != nil {
		arrowipc.Release(batches)
		return nil, err
	}
	return fromBatches("recording", batches)
}

// fromBatches converts and releases batches.
func fromBatches(name string, batches []arrow.RecordBatch) ([]*kgo.Record, error) {
	defer arrowipc.Release(batches)
	var out []*kgo.Record
	for i, b := range batches {
		recs, err := recordsFromBatch(b)
		if err != nil {
			return nil, fmt.Errorf("%s: batch %d: %w", name, i, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// Replay produces every record of the recording cfg.In to its topic (or
// the one TopicMap names), keeping its key, value, headers, timestamp and,
// when the target topic has enough partitions, its partition, so the
// order within each partition is the recorded one. Records are paced by
// their original timestamps divided by Speed.
func Replay(ctx context.Context, cfg ReplayConfig) (ReplayStats, error) {
	if err := cfg.Validate(); err != nil {
		return ReplayStats{}, err
	}
	recs, err := ReadRecording(cfg.In)
	if err != nil {
		return ReplayStats{}, err
	}
	cl, err := replayClient(cfg)
	if err != nil {
		return ReplayStats{}, err
	}
	defer cl.Close()
	for _, r := range recs {
		if to, ok := cfg.TopicMap[r.Topic]; ok {
			r.Topic = to
		}
	}
	if cfg.CreateTopics {
		if err := createTopics(ctx, cl, recs); err != nil {
			return ReplayStats{}, err
		}
	}
	rp := newReplayer(cfg, cl)
	return rp.run(ctx, recs)
}

func replayClient(cfg ReplayConfig) (*kgo.Client, error) {
	opts, err := cfg.Kafka.Opts()
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	opts = append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
			return keepPartition
		})),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("recorder: kafka client: %w", err)
	}
	return cl, nil
}

// keepPartition sends a record to its recorded partition, or wraps it
// around a topic with fewer partitions.
func keepPartition(r *kgo.Record, n int) int { return int(r.Partition) % n }

func createTopics(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	parts := map[string]int32{}
	for _, r := range recs {
		parts[r.Topic] = max(parts[r.Topic], r.Partition+1)
	}
	for _, t := range slices.Sorted(maps.Keys(parts)) {
		if err := kafka.EnsureTopics(ctx, cl, parts[t], -1, t); err != nil {
			return fmt.Errorf("recorder: %w", err)
		}
	}
	return nil
}

// replayer paces and produces one recording.
type replayer struct {
	cfg   ReplayConfig
	cl    *kgo.Client
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu       sync.Mutex
	firstErr error
	acked    int64
}

func newReplayer(cfg ReplayConfig, cl *kgo.Client) *replayer {
	rp := &replayer{cfg: cfg, cl: cl, now: cfg.Now, sleep: cfg.Sleep}
	if rp.now == nil {
		rp.now = time.Now
	}
	if rp.sleep == nil {
		rp.sleep = sleepCtx
	}
	return rp
}

func (rp *replayer) run(ctx context.Context, recs []*kgo.Record) (ReplayStats, error) {
	var st ReplayStats
	if len(recs) == 0 {
		rp.progress(0, len(recs), "done")
		return st, nil
	}
	first := recs[0].Timestamp
	latest := first
	st.Span = span(recs)
	start, shown := rp.now(), rp.now()
	for i, r := range recs {
		if r.Timestamp.After(latest) {
			latest = r.Timestamp
		}
		if err := rp.pace(ctx, start, latest.Sub(first)); err != nil {
			return rp.finish(st, err)
		}
		if err := rp.failed(); err != nil {
			return rp.finish(st, err)
		}
		r.Offset, r.LeaderEpoch = 0, 0
		rp.cl.Produce(ctx, r, rp.promise)
		if rp.cfg.Progress != nil && rp.now().Sub(shown) >= rp.cfg.ProgressInterval {
			shown = rp.now()
			rp.progress(i+1, len(recs), "replaying")
		}
	}
	if err := rp.cl.Flush(ctx); err != nil {
		return rp.finish(st, fmt.Errorf("recorder: flush: %w", err))
	}
	st, err := rp.finish(st, nil)
	rp.progress(int(st.Records), len(recs), "done")
	return st, err
}

// span is the time from the earliest to the latest timestamp.
func span(recs []*kgo.Record) time.Duration {
	lo, hi := recs[0].Timestamp, recs[0].Timestamp
	for _, r := range recs[1:] {
		if r.Timestamp.Before(lo) {
			lo = r.Timestamp
		}
		if r.Timestamp.After(hi) {
			hi = r.Timestamp
		}
	}
	return hi.Sub(lo)
}

// pace waits until the wall clock is offset/Speed after start.
func (rp *replayer) pace(ctx context.Context, start time.Time, offset time.Duration) error {
	if rp.cfg.Speed == 0 {
		return ctx.Err()
	}
	target := start.Add(time.Duration(float64(offset) / rp.cfg.Speed))
	if d := target.Sub(rp.now()); d > 0 {
		return rp.sleep(ctx, d)
	}
	return ctx.Err()
}

func (rp *replayer) promise(r *kgo.Record, err error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if err != nil {
		if rp.firstErr == nil {
			rp.firstErr = fmt.Errorf("recorder: produce to %s: %w", r.Topic, err)
		}
		return
	}
	rp.acked++
}

func (rp *replayer) failed() error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.firstErr
}

// finish waits for outstanding records when the replay stops early, and
// returns the stats with the first error.
func (rp *replayer) finish(st ReplayStats, err error) (ReplayStats, error) {
	if err != nil {
		rp.cl.AbortBufferedRecords(context.Background())
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	st.Records = rp.acked
	switch {
	case err == nil:
		err = rp.firstErr
	case rp.firstErr != nil && err != rp.firstErr:
		err = errors.Join(err, rp.firstErr)
	}
	return st, err
}

func (rp *replayer) progress(done, total int, state string) {
	if rp.cfg.Progress == nil {
		return
	}
	fmt.Fprintf(rp.cfg.Progress, "replay: %s: %d/%d records from %s\n", state, done, total, rp.cfg.In)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
