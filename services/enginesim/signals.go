package enginesim

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kafka"
)

// signals publishes the engines' events: to Kafka when configured (never
// blocking: with the producer's buffer full a record is dropped and
// counted), and to the OnEvent hook.
type signals struct {
	prod    *kafka.Producer // nil without Kafka
	topic   string
	onEvent func(schemas.Event)

	published, invalid atomic.Uint64
	closeOnce          sync.Once
}

// SignalStats count the signal events.
type SignalStats struct {
	Published uint64 // events handed to Kafka and/or OnEvent
	Invalid   uint64 // events that failed schema validation (a bug)
	Acked     uint64 // records Kafka acknowledged
	Failed    uint64 // records that failed (Dropped included), e.g. while Kafka is down
	Dropped   uint64 // records dropped because the producer's buffer was full
}

func newSignals(cfg Config, prop propagation.TextMapPropagator) (*signals, error) {
	s := &signals{topic: cfg.Topic, onEvent: cfg.OnEvent}
	if len(cfg.Kafka.Brokers) == 0 {
		return s, nil
	}
	pc := cfg.Producer
	if pc.Propagator == nil {
		pc.Propagator = prop
	}
	p, err := kafka.NewProducer(cfg.Kafka, pc)
	if err != nil {
		return nil, err
	}
	s.prod = p
	return s, nil
}

var schemaHeader = kgo.RecordHeader{Key: schemas.HeaderSchema, Value: []byte(schemas.SchemaSignalV1)}

// publish encodes ev and sends it; ctx carries the trace context for the
// record headers and is never cancelled.
func (s *signals) publish(ctx context.Context, key []byte, ev *schemas.Event) {
	if s.onEvent != nil {
		s.onEvent(*ev)
	}
	if s.prod != nil {
		value, err := schemas.AppendEvent(make([]byte, 0, schemas.EncodedSize(ev)), ev)
		if err != nil {
			s.invalid.Add(1)
			return
		}
		s.prod.TryProduce(ctx, s.topic, key, value, schemaHeader)
	}
	s.published.Add(1)
}

// ensureTopic creates the topic if it is missing; a failure is only
// logged (the producer may auto-create it, and serving goes on).
func (s *signals) ensureTopic(ctx context.Context, log *slog.Logger) {
	if s.prod == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, s.prod.Client(), -1, -1, s.topic); err != nil && ctx.Err() == nil {
		log.Warn("enginesim: could not create the signals topic; producing anyway", "topic", s.topic, "err", err)
	}
}

func (s *signals) stats() SignalStats {
	st := SignalStats{Published: s.published.Load(), Invalid: s.invalid.Load()}
	if s.prod != nil {
		ps := s.prod.Stats()
		st.Acked, st.Failed, st.Dropped = ps.Acked, ps.Failed, ps.Dropped
	}
	return st
}

// close flushes (bounded by the producer's close timeout) and closes.
func (s *signals) close() {
	s.closeOnce.Do(func() {
		if s.prod != nil {
			_ = s.prod.Close()
		}
	})
}

// atomicFloat is a float64 read and written atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) Store(v float64) { f.bits.Store(math.Float64bits(v)) }
func (f *atomicFloat) Load() float64   { return math.Float64frombits(f.bits.Load()) }
