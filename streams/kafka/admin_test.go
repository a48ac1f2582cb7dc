package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestEnsureTopicsIdempotent(t *testing.T) {
	addrs := streamstest.Kafka(t, "pre")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 2 {
		if err := kafka.EnsureTopics(ctx, cl, 5, 1, "x", "y", "pre"); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{"x": 5, "y": 5, "pre": streamstest.Partitions} {
		if got := len(td[topic].Partitions); got != want {
			t.Errorf("%s: %d partitions, want %d (existing topics stay as they are)", topic, got, want)
		}
	}
	if err := kafka.EnsureTopics(ctx, cl, 1, 1); err != nil {
		t.Fatalf("no topics: %v", err)
	}
}

func TestEnsureTopicsRejectsBadInput(t *testing.T) {
	addrs := streamstest.Kafka(t, "pre")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxTimeout(t, 10*time.Second)
	for name, call := range map[string]func() error{
		"bad name":      func() error { return kafka.EnsureTopics(ctx, cl, 1, 1, "a/b") },
		"zero parts":    func() error { return kafka.EnsureTopics(ctx, cl, 0, 1, "a") },
		"zero replicas": func() error { return kafka.EnsureTopics(ctx, cl, 1, 0, "a") },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// -1 means the broker's default.
	if err := kafka.EnsureTopics(ctx, cl, -1, -1, "dflt"); err != nil {
		t.Fatalf("broker defaults: %v", err)
	}
}
