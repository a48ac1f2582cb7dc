package optimizer

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
	"github.com/ilb-router/ilb/streams/kafka"
)

// errSkip marks a record refused for a counted reason.
type errSkip struct {
	reason string
	err    error
}

func (e errSkip) Error() string { return e.reason + ": " + e.err.Error() }
func (e errSkip) Unwrap() error { return e.err }

// featuresStart reads back backlog records of each features partition, so
// the first solve sees the latest windows.
func featuresStart(backlog int64) kgo.Offset {
	return kgo.NewOffset().AtEnd().Relative(-backlog)
}

// profilesStart reads profiles from the beginning: the latest fit of an
// engine may be old, and it is still the best there is.
func profilesStart() kgo.Offset { return kgo.NewOffset().AtStart() }

// consume reads topic with a plain consumer (no group: every optimizer
// instance reads everything) from start, decodes each record and hands it
// to the solve loop, until ctx ends. Bad records are counted and skipped.
func (o *Optimizer) consume(ctx context.Context, topic string, start kgo.Offset, decode func(*kgo.Record) ([]schemas.Feature, []schemas.Profile, error)) error {
	opts, err := o.deps.Kafka.Opts()
	if err != nil {
		return fmt.Errorf("optimizer: kafka: %w", err)
	}
	opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("optimizer: kafka client for %s: %w", topic, err)
	}
	defer cl.Close()
	if err := kafka.EnsureTopics(ctx, cl, -1, -1, topic); err != nil && ctx.Err() == nil {
		o.log.Warn("optimizer: could not create topic; consuming anyway", "topic", topic, "err", err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			o.log.Warn("optimizer: fetch", "topic", t, "partition", p, "err", err)
		})
		for it := fs.RecordIter(); !it.Done(); {
			if !o.handleRecord(ctx, it.Next(), decode) {
				return nil
			}
		}
	}
}

// handleRecord decodes r and sends it to the loop; false when ctx ended.
func (o *Optimizer) handleRecord(ctx context.Context, r *kgo.Record, decode func(*kgo.Record) ([]schemas.Feature, []schemas.Profile, error)) bool {
	fs, ps, err := decode(r)
	if err != nil {
		reason := rejectDecode
		var s errSkip
		if errors.As(err, &s) {
			reason = s.reason
		}
		o.met.inputsRejected(ctx, reason, 1)
		o.log.Warn("optimizer: record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		if v := headerInt(r, schemas.HeaderAsOf); v > 0 && r.Topic == o.cfg.ProfilesTopic {
			// The event clock must not wait for a fit that did arrive,
			// unreadable: it goes on without it.
			select {
			case o.inbox <- input{asOf: v}:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	span := trace.SpanContextFromContext(kafka.ExtractTrace(ctx, o.prop, r))
	select {
	case o.inbox <- input{features: fs, profiles: ps, asOf: asOf(r, ps), src: sourcePartition(r), profAsOf: headerInt(r, schemas.HeaderProfilesAsOf), span: span}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (o *Optimizer) decodeFeatures(r *kgo.Record) ([]schemas.Feature, []schemas.Profile, error) {
	rows, err := decodeTable(r, schemas.FeatureSchemaVersion, schemas.FeaturesFromRecord)
	return rows, nil, err
}

func (o *Optimizer) decodeProfiles(r *kgo.Record) ([]schemas.Feature, []schemas.Profile, error) {
	rows, err := decodeTable(r, schemas.ProfileSchemaVersion, schemas.ProfilesFromRecord)
	return nil, rows, err
}

// decodeTable reads the Arrow IPC stream in r's value into rows. A record
// whose ilb-schema header names another format is refused; one without
// the header is read (the Arrow schema's own metadata is checked anyway).
func decodeTable[T any](r *kgo.Record, version string, rows func(arrow.RecordBatch) ([]T, error)) ([]T, error) {
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderSchema && string(h.Value) != version {
			return nil, errSkip{rejectSchema, fmt.Errorf("header %s=%q, want %q", schemas.HeaderSchema, h.Value, version)}
		}
	}
	recs, _, err := arrowipc.DecodeStream(r.Value, memory.DefaultAllocator)
	if err != nil {
		return nil, errSkip{rejectDecode, err}
	}
	defer arrowipc.Release(recs)
	var out []T
	for _, rec := range recs {
		got, err := rows(rec)
		if err != nil {
			return nil, errSkip{rejectDecode, err}
		}
		out = append(out, got...)
	}
	return out, nil
}

// asOf is the event time of the windows a profiles record's fits saw: its
// schemas.HeaderAsOf header (aggregators on the event clock set it), else
// the latest fitted_at of its rows.
func asOf(r *kgo.Record, rows []schemas.Profile) int64 {
	if v := headerInt(r, schemas.HeaderAsOf); v > 0 {
		return v
	}
	var t int64
	for _, p := range rows {
		t = max(t, p.FittedAtUnixNano)
	}
	return t
}

// sourcePartition is the signals partition a features record's rows come
// from (its schemas.HeaderWindow); -1 when the header is missing or bad.
func sourcePartition(r *kgo.Record) int32 {
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderWindow {
			if id, err := schemas.ParseWindowID(string(h.Value)); err == nil {
				return id.Partition
			}
		}
	}
	return -1
}

// headerInt is r's header key as a positive decimal integer; 0 when it is
// missing or not one.
func headerInt(r *kgo.Record, key string) int64 {
	for _, h := range r.Headers {
		if h.Key == key {
			if v, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}
