package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
)

// RecordConfig configures Record.
type RecordConfig struct {
	Kafka kafka.ClientConfig
	// Topics are recorded, every partition of each.
	Topics []string
	// Out is the recording's path. It appears when Record returns; while
	// recording, batches go to Out + arrowipc.PartialSuffix, which Replay
	// reads if the recorder was killed.
	Out string
	// FromStart records each partition from its first retained record;
	// false records only what is produced after Record starts.
	FromStart bool
	// Duration stops the recording after this long (wall time); 0 runs
	// until the context ends.
	Duration time.Duration
	// MaxRecords stops the recording after this many records; 0 means no
	// limit.
	MaxRecords int64
	// FlushRecords and FlushInterval bound what a killed recorder loses:
	// a batch is written every FlushRecords records or FlushInterval,
	// whichever comes first.
	FlushRecords  int
	FlushInterval time.Duration
	// Progress receives a progress line every ProgressInterval and a
	// summary at the end; nil prints nothing.
	Progress         io.Writer
	ProgressInterval time.Duration
	Logger           *slog.Logger // nil discards
}

// DefaultRecordConfig records ilb.signals from now on into out, against
// the local embedded broker, flushing every 1000 records or second.
func DefaultRecordConfig(out string) RecordConfig {
	return RecordConfig{
		Kafka:            kafka.DefaultClientConfig(),
		Topics:           []string{schemas.TopicSignals},
		Out:              out,
		FlushRecords:     1000,
		FlushInterval:    time.Second,
		ProgressInterval: 5 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c RecordConfig) Validate() error {
	if err := c.Kafka.Validate(); err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	if len(c.Topics) == 0 {
		return errors.New("recorder: no topic to record")
	}
	for _, t := range c.Topics {
		if err := schemas.ValidTopicName(t); err != nil {
			return fmt.Errorf("recorder: %w", err)
		}
	}
	switch {
	case c.Out == "":
		return errors.New("recorder: no output file")
	case c.Duration < 0 || c.MaxRecords < 0:
		return fmt.Errorf("recorder: duration %v and max records %d must not be negative", c.Duration, c.MaxRecords)
	case c.FlushRecords < 1 || c.FlushInterval <= 0:
		return fmt.Errorf("recorder: flush every %d records / %v: both must be positive", c.FlushRecords, c.FlushInterval)
	case c.Progress != nil && c.ProgressInterval <= 0:
		return fmt.Errorf("recorder: progress interval %v must be positive", c.ProgressInterval)
	}
	return nil
}

// RecordStats describe a finished recording.
type RecordStats struct {
	Records int64 // Kafka records written
	Bytes   int64 // their keys, values and headers
	Batches int   // Arrow record batches in the file
}

// Record consumes cfg.Topics and writes every record to an Arrow IPC file
// (RecordingSchema) until ctx ends, Duration passes or MaxRecords are in.
// Then it writes the file's footer and moves it to cfg.Out. Ending by ctx
// is a normal stop, not an error.
func Record(ctx context.Context, cfg RecordConfig) (RecordStats, error) {
	if err := cfg.Validate(); err != nil {
		return RecordStats{}, err
	}
	opts, err := cfg.Kafka.Opts()
	if err != nil {
		return RecordStats{}, fmt.Errorf("recorder: %w", err)
	}
	start := kgo.NewOffset().AtEnd()
	if cfg.FromStart {
		start = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(cfg.Topics...), kgo.ConsumeResetOffset(start))...)
	if err != nil {
		return RecordStats{}, fmt.Errorf("recorder: kafka client: %w", err)
	}
	defer cl.Close()
	w, err := arrowipc.NewFileWriter(cfg.Out, RecordingSchema)
	if err != nil {
		return RecordStats{}, fmt.Errorf("recorder: %w", err)
	}
	r := &recording{cfg: cfg, cl: cl, w: w, bb: newBatchBuilder(memory.DefaultAllocator)}
	defer r.bb.release()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	if err := r.loop(ctx); err != nil {
		return r.stats(), errors.Join(err, w.Abort())
	}
	if err := r.writeBatch(); err != nil {
		return r.stats(), errors.Join(err, w.Abort())
	}
	if err := w.Close(); err != nil {
		return r.stats(), fmt.Errorf("recorder: %w", err)
	}
	r.progress("done")
	return r.stats(), nil
}

// recording is the state of one Record call.
type recording struct {
	cfg       RecordConfig
	cl        *kgo.Client
	w         *arrowipc.FileWriter
	bb        *batchBuilder
	records   int64
	lastFlush time.Time
	lastShown time.Time
}

func (r *recording) stats() RecordStats {
	return RecordStats{Records: r.records, Bytes: r.bb.bytes, Batches: r.w.Batches()}
}

func (r *recording) loop(ctx context.Context) error {
	r.lastFlush, r.lastShown = time.Now(), time.Now()
	for ctx.Err() == nil && (r.cfg.MaxRecords == 0 || r.records < r.cfg.MaxRecords) {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.FlushInterval)
		fs := r.cl.PollRecords(pctx, r.cfg.FlushRecords)
		cancel()
		if fs.IsClientClosed() {
			return errors.New("recorder: kafka client closed")
		}
		r.logErrors(fs)
		for _, rec := range fs.Records() {
			if r.cfg.MaxRecords > 0 && r.records >= r.cfg.MaxRecords {
				break
			}
			r.bb.add(rec)
			r.records++
			if r.bb.n >= r.cfg.FlushRecords {
				if err := r.writeBatch(); err != nil {
					return err
				}
			}
		}
		if time.Since(r.lastFlush) >= r.cfg.FlushInterval {
			if err := r.writeBatch(); err != nil {
				return err
			}
		}
		if r.cfg.Progress != nil && time.Since(r.lastShown) >= r.cfg.ProgressInterval {
			r.progress("recording")
		}
	}
	return nil
}

func (r *recording) logErrors(fs kgo.Fetches) {
	fs.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if r.cfg.Logger != nil {
			r.cfg.Logger.Warn("recorder: fetch failed", "topic", topic, "partition", p, "err", err)
		}
	})
}

// writeBatch writes what has accumulated as one batch.
func (r *recording) writeBatch() error {
	r.lastFlush = time.Now()
	rec := r.bb.flush()
	if rec == nil {
		return nil
	}
	defer rec.Release()
	if err := r.w.Write(rec); err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	return nil
}

func (r *recording) progress(state string) {
	r.lastShown = time.Now()
	if r.cfg.Progress == nil {
		return
	}
	fmt.Fprintf(r.cfg.Progress, "record: %s: %d records, %s, %d batches written to %s\n",
		state, r.records, humanBytes(r.bb.bytes), r.w.Batches(), r.cfg.Out)
}

// humanBytes formats n bytes with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
