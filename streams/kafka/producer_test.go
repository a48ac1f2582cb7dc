package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestProduceConsumeRoundTrip(t *testing.T) {
	const topic, n = "ilb.signals", 60
	addrs := streamstest.Kafka(t, topic)
	ctx := ctxTimeout(t, 20*time.Second)
	p := newProducer(t, addrs, nil)
	for i := range n {
		key := fmt.Sprintf("eng-%d", i%5)
		p.Produce(ctx, topic, []byte(key), []byte(fmt.Sprint(i)), kgo.RecordHeader{Key: "ilb-schema", Value: []byte("signal/v1")})
	}
	if err := p.ProduceSync(ctx, topic, []byte("eng-0"), []byte("sync")); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Acked != n+1 || st.Failed != 0 {
		t.Fatalf("stats %+v, want %d acked", st, n+1)
	}

	c := newCollector()
	r := runGroup(t, fastGroup(addrs, "rt", topic), c.handle)
	waitFor(t, 15*time.Second, "all records consumed", func() bool { return c.count() >= n+1 })
	if err := r.stop(t); err != nil {
		t.Fatalf("RunGroup: %v", err)
	}
	// Per key, order is kept (one key, one partition); values and headers
	// arrive intact.
	lastByKey := map[string]int{}
	for _, rec := range c.recs {
		if string(rec.Value) == "sync" {
			continue
		}
		var v int
		fmt.Sscan(string(rec.Value), &v)
		k := string(rec.Key)
		if prev, ok := lastByKey[k]; ok && v <= prev {
			t.Fatalf("key %s: value %d after %d", k, v, prev)
		}
		lastByKey[k] = v
		if len(rec.Headers) != 1 || string(rec.Headers[0].Value) != "signal/v1" {
			t.Fatalf("headers %v", rec.Headers)
		}
	}
	if len(lastByKey) != 5 || c.count() != n+1 {
		t.Fatalf("got %d records over %d keys", c.count(), len(lastByKey))
	}
}

func TestProduceFailureIsCountedAndReported(t *testing.T) {
	addrs := streamstest.Kafka(t, "exists")
	var reported atomic.Int64
	p := newProducer(t, addrs, func(pc *kafka.ProducerConfig) {
		pc.DeliveryTimeout = time.Second
		pc.OnError = func(r *kgo.Record, err error) {
			if r.Topic == "missing" && err != nil {
				reported.Add(1)
			}
		}
	})
	ctx := ctxTimeout(t, 10*time.Second)
	p.Produce(ctx, "missing", nil, []byte("x")) // no auto creation: never deliverable
	p.Produce(ctx, "exists", nil, []byte("y"))
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Failed != 1 || st.Acked != 1 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 1 failed 1 acked", st)
	}
	if reported.Load() != 1 {
		t.Fatalf("OnError called %d times for the failed record, want 1", reported.Load())
	}
	if err := p.ProduceSync(ctx, "missing", nil, []byte("z")); err == nil {
		t.Fatal("ProduceSync to a missing topic succeeded")
	}
}

func TestTryProduceDropsWhenBufferFull(t *testing.T) {
	k := streamstest.NewKafkaServer(t, "", "t")
	k.Stop() // nothing gets acked: the buffer stays full
	p := newProducer(t, k.Addrs(), func(pc *kafka.ProducerConfig) {
		pc.MaxBufferedRecords = 2
		pc.DeliveryTimeout = time.Second
		pc.CloseTimeout = time.Second
	})
	ctx := ctxTimeout(t, 10*time.Second)
	for range 5 {
		p.TryProduce(ctx, "t", nil, []byte("x"))
	}
	// Failure callbacks run on franz-go's goroutine, shortly after.
	waitFor(t, 5*time.Second, "3 drops counted", func() bool { return p.Stats().Dropped == 3 })
	if st := p.Stats(); st.Failed != 3 || st.Acked != 0 {
		t.Fatalf("after 5 TryProduce with room for 2: %+v, want only the 3 drops failed", st)
	}
	// Produce blocks on a full buffer until its context ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	began := time.Now()
	p.Produce(short, "t", nil, []byte("x"))
	if time.Since(began) < 40*time.Millisecond {
		t.Fatal("Produce did not block on a full buffer")
	}
	p.Flush(ctx)
	if st := p.Stats(); st.Acked != 0 || st.Failed != 6 {
		t.Fatalf("final stats %+v, want 6 failed", st)
	}
}

func TestProducerConfigValidate(t *testing.T) {
	cases := map[string]func(*kafka.ProducerConfig){
		"no buffer":        func(c *kafka.ProducerConfig) { c.MaxBufferedRecords = 0 },
		"negative linger":  func(c *kafka.ProducerConfig) { c.Linger = -1 },
		"no delivery time": func(c *kafka.ProducerConfig) { c.DeliveryTimeout = 0 },
		"under a second":   func(c *kafka.ProducerConfig) { c.DeliveryTimeout = 999 * time.Millisecond },
		"no close time":    func(c *kafka.ProducerConfig) { c.CloseTimeout = 0 },
	}
	if err := kafka.DefaultProducerConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range cases {
		pc := kafka.DefaultProducerConfig()
		mut(&pc)
		if _, err := kafka.NewProducer(kafka.DefaultClientConfig(), pc); err == nil {
			t.Errorf("%s: NewProducer accepted it", name)
		}
	}
	if _, err := kafka.NewProducer(kafka.ClientConfig{}, kafka.DefaultProducerConfig()); err == nil {
		t.Error("NewProducer accepted an empty client config")
	}
}
