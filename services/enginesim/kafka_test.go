package enginesim

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// consumeSignals reads ilb.signals from the start until ok has seen what
// it needs or 15 s pass.
func consumeSignals(t *testing.T, addrs []string, ok func(r *kgo.Record, ev *schemas.Event) bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(schemas.TopicSignals),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			var ev schemas.Event
			if err := schemas.DecodeEvent(r.Value, &ev); err != nil {
				t.Fatalf("record at offset %d does not decode: %v", r.Offset, err)
			}
			if err := ev.Validate(); err != nil {
				t.Fatalf("record at offset %d: %v", r.Offset, err)
			}
			if ok(r, &ev) {
				return
			}
		}
	}
	t.Fatal("did not see the expected signals on Kafka within 15 s")
}

func TestSignalsArriveOnKafka(t *testing.T) {
	addrs := streamstest.Kafka(t)
	h := start(t, func(c *Config) { c.Kafka.Brokers = addrs })
	code, body := h.post(t, chatPath("a100-b"), chat(3, false, "user", "hello kafka"),
		HeaderConversation, "k1", HeaderCluster, "fe-a")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var sawCompletion, sawStatus bool
	consumeSignals(t, addrs, func(r *kgo.Record, ev *schemas.Event) bool {
		schema := ""
		for _, hd := range r.Headers {
			if hd.Key == schemas.HeaderSchema {
				schema = string(hd.Value)
			}
		}
		engineName := ev.Status.Engine
		if ev.Kind == schemas.KindCompletion {
			engineName = ev.Completion.Engine
		}
		if schema != schemas.SchemaSignalV1 || string(r.Key) != engineName {
			t.Fatalf("record key %q, schema header %q for an event of %q", r.Key, schema, engineName)
		}
		switch {
		case ev.Kind == schemas.KindCompletion && ev.Completion.ConversationID == "k1":
			c := ev.Completion
			sawCompletion = c.Engine == "a100-b" && c.Cluster == "fe-a" && c.PromptTokens == 5 && c.OutputTokens == 3 && c.TTFTMs > 0
			if !sawCompletion {
				t.Fatalf("completion %+v", c)
			}
		case ev.Kind == schemas.KindStatus && ev.Status.Engine == "h100-a":
			s := ev.Status
			sawStatus = s.Health == schemas.HealthHealthy && s.ReadyReplicas == 2 && s.TotalReplicas == 2
		}
		return sawCompletion && sawStatus
	})
}

// With the broker gone the engines keep serving; buffered signals reach
// Kafka once it is back.
func TestKafkaDownDoesNotStopServing(t *testing.T) {
	k := streamstest.NewKafkaServer(t, "")
	k.Stop()
	h := start(t, func(c *Config) {
		c.Kafka.Brokers = k.Addrs()
		c.Producer.DeliveryTimeout = 30 * time.Second
		c.Producer.CloseTimeout = 500 * time.Millisecond
	})
	for i := range 5 {
		code, body := h.post(t, chatPath("h100-a"), chat(2, false, "user", "still here?"), HeaderConversation, "down")
		if code != 200 {
			t.Fatalf("request %d with Kafka down: %d %s", i, code, body)
		}
	}
	if st := h.s.Stats().Signals; st.Published < 5 || st.Acked != 0 {
		t.Fatalf("signals while Kafka is down: %+v", st)
	}
	k.Restart() // franz-go takes ~5 s to find it again
	consumeSignals(t, k.Addrs(), func(_ *kgo.Record, ev *schemas.Event) bool {
		return ev.Kind == schemas.KindCompletion && ev.Completion.ConversationID == "down"
	})
	if st := h.s.Stats().Signals; st.Acked == 0 {
		t.Errorf("nothing acked after the broker came back: %+v", st)
	}
}
