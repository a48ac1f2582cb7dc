package kafka_test

import (
	"testing"

	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// BenchmarkProduce measures the async produce path end to end against the
// in-process broker (acks included, via the final Flush).
func BenchmarkProduce(b *testing.B) {
	addrs := streamstest.Kafka(b, "bench")
	pc := kafka.DefaultProducerConfig()
	p, err := kafka.NewProducer(clientConfig(addrs), pc)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := b.Context()
	key, value := []byte("eng-0"), make([]byte, 120) // about one signal event
	b.ReportAllocs()
	for b.Loop() {
		p.Produce(ctx, "bench", key, value)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if st := p.Stats(); st.Failed != 0 {
		b.Fatalf("%d records failed", st.Failed)
	}
}
