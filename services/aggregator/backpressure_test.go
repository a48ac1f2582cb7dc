package aggregator

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestBackpressurePausesFetching(t *testing.T) {
	cfg := testConfig([]string{"127.0.0.1:1"}, "g-bp")
	cfg.MaxPendingRecords = 2
	a, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.ConsumeTopics(cfg.SignalsTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	a.core.outbox = make([]*kgo.Record, 3)
	a.backpressureLocked(cl)
	if !a.paused || !slices.Contains(cl.PauseFetchTopics(), cfg.SignalsTopic) {
		t.Fatalf("3 pending over a limit of 2: paused %v, client pauses %v", a.paused, cl.PauseFetchTopics())
	}
	a.core.outbox = a.core.outbox[:1]
	a.backpressureLocked(cl)
	if !a.paused {
		t.Fatal("resumed with records still pending")
	}
	a.core.outbox = nil
	a.backpressureLocked(cl)
	if a.paused || len(cl.PauseFetchTopics()) != 0 {
		t.Fatalf("all published: paused %v, client pauses %v", a.paused, cl.PauseFetchTopics())
	}
}
