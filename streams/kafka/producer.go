package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
)

// ProducerConfig tunes a Producer.
type ProducerConfig struct {
	// MaxBufferedRecords bounds the records waiting to be sent. When the
	// buffer is full, Produce blocks and TryProduce drops.
	MaxBufferedRecords int
	// Linger is how long a partition batch waits for more records; 0
	// sends as soon as possible.
	Linger time.Duration
	// DeliveryTimeout bounds how long one record may take to be acked,
	// retries included, before it fails; at least one second.
	DeliveryTimeout time.Duration
	// CloseTimeout bounds the final flush in Close.
	CloseTimeout time.Duration
	// AllowAutoTopicCreation lets producing to a missing topic create it
	// (if the brokers allow it).
	AllowAutoTopicCreation bool
	// Propagator, when non-nil, injects the trace context of the ctx given
	// to Produce into each record's headers.
	Propagator propagation.TextMapPropagator
	// OnError, when non-nil, is called for every record that failed
	// (including dropped ones), on a franz-go goroutine. It must not block.
	OnError func(r *kgo.Record, err error)
}

// DefaultProducerConfig returns settings for signal publishing: small
// linger, bounded buffer, records given up after 30 s.
func DefaultProducerConfig() ProducerConfig {
	return ProducerConfig{
		MaxBufferedRecords: 10_000,
		Linger:             5 * time.Millisecond,
		DeliveryTimeout:    30 * time.Second,
		CloseTimeout:       10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c ProducerConfig) Validate() error {
	switch {
	case c.MaxBufferedRecords < 1:
		return fmt.Errorf("kafka: max buffered records %d must be at least 1", c.MaxBufferedRecords)
	case c.Linger < 0:
		return fmt.Errorf("kafka: linger %v is negative", c.Linger)
	case c.DeliveryTimeout < time.Second:
		return fmt.Errorf("kafka: delivery timeout %v must be at least 1s (franz-go's floor)", c.DeliveryTimeout)
	case c.CloseTimeout <= 0:
		return fmt.Errorf("kafka: close timeout %v must be positive", c.CloseTimeout)
	}
	return nil
}

// Producer sends records to Kafka asynchronously, idempotently and with
// acks from all in-sync replicas.
type Producer struct {
	cl  *kgo.Client
	cfg ProducerConfig

	acked, failed, dropped atomic.Uint64
}

// ProducerStats are a Producer's counters since it was created.
type ProducerStats struct {
	Acked   uint64 // records the brokers acknowledged
	Failed  uint64 // records that failed, Dropped included
	Dropped uint64 // records TryProduce refused because the buffer was full
}

// NewProducer validates the configurations and connects lazily: it does
// not fail when the brokers are down.
func NewProducer(cc ClientConfig, pc ProducerConfig) (*Producer, error) {
	if err := pc.Validate(); err != nil {
		return nil, err
	}
	opts, err := cc.Opts()
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(pc.MaxBufferedRecords),
		kgo.ProducerLinger(pc.Linger),
		kgo.RecordDeliveryTimeout(pc.DeliveryTimeout),
	)
	if pc.AllowAutoTopicCreation {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new producer: %w", err)
	}
	return &Producer{cl: cl, cfg: pc}, nil
}

// Client returns the underlying client, e.g. for EnsureTopics. It is
// closed by Close.
func (p *Producer) Client() *kgo.Client { return p.cl }

// Produce queues a record and returns; the outcome is counted in Stats
// and failures go to ProducerConfig.OnError. It blocks while the buffer
// is full, until ctx ends (then the record fails with ctx's error).
//
// ctx stays attached to the record until it is sent: ending ctx earlier
// fails the record and, in franz-go, the partition batch it is in. Pass a
// context that lives as long as the service (not a per-request one).
func (p *Producer) Produce(ctx context.Context, topic string, key, value []byte, headers ...kgo.RecordHeader) {
	p.cl.Produce(ctx, p.record(ctx, topic, key, value, headers), p.promise)
}

// TryProduce is Produce that never blocks: with a full buffer the record
// is dropped (counted in Stats.Dropped and passed to OnError with
// kgo.ErrMaxBuffered).
func (p *Producer) TryProduce(ctx context.Context, topic string, key, value []byte, headers ...kgo.RecordHeader) {
	p.cl.TryProduce(ctx, p.record(ctx, topic, key, value, headers), p.promise)
}

// ProduceSync sends one record and waits for its acknowledgement.
func (p *Producer) ProduceSync(ctx context.Context, topic string, key, value []byte, headers ...kgo.RecordHeader) error {
	r := p.record(ctx, topic, key, value, headers)
	err := p.cl.ProduceSync(ctx, r).FirstErr()
	p.count(r, err)
	if err != nil {
		return fmt.Errorf("kafka: produce to %s: %w", topic, err)
	}
	return nil
}

func (p *Producer) record(ctx context.Context, topic string, key, value []byte, headers []kgo.RecordHeader) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: key, Value: value}
	if len(headers) > 0 {
		r.Headers = append(make([]kgo.RecordHeader, 0, len(headers)+2), headers...)
	}
	if p.cfg.Propagator != nil {
		InjectTrace(ctx, p.cfg.Propagator, r)
	}
	return r
}

func (p *Producer) promise(r *kgo.Record, err error) { p.count(r, err) }

func (p *Producer) count(r *kgo.Record, err error) {
	if err == nil {
		p.acked.Add(1)
		return
	}
	p.failed.Add(1)
	if errors.Is(err, kgo.ErrMaxBuffered) {
		p.dropped.Add(1)
	}
	if p.cfg.OnError != nil {
		p.cfg.OnError(r, err)
	}
}

// Stats returns the producer's counters.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{Acked: p.acked.Load(), Failed: p.failed.Load(), Dropped: p.dropped.Load()}
}

// Flush waits until every queued record is acked or failed, or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka: flush: %w", err)
	}
	return nil
}

// Close flushes for at most ProducerConfig.CloseTimeout, then closes the
// client; records still queued then fail.
func (p *Producer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CloseTimeout)
	defer cancel()
	err := p.Flush(ctx)
	p.cl.Close()
	return err
}
