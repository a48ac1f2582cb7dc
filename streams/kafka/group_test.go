package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func produceN(t *testing.T, p *kafka.Producer, topic string, from, n int) {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	for i := from; i < from+n; i++ {
		p.Produce(ctx, topic, []byte(fmt.Sprint("k", i)), []byte(fmt.Sprint(i)))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

var errPoison = errors.New("poison record")

// TestHandlerErrorRedeliversOnlyUnhandled: a handler error ends RunGroup
// without committing the failing batch; the next member of the group
// starts exactly after the last batch that was handled.
func TestHandlerErrorRedeliversOnlyUnhandled(t *testing.T) {
	addrs := streamstest.Kafka(t, "t")
	p := newProducer(t, addrs, nil)
	if err := kafka.EnsureTopics(ctxTimeout(t, 5*time.Second), p.Client(), 1, 1, "one"); err != nil {
		t.Fatal(err)
	}
	produceN(t, p, "one", 0, 10)

	gc := fastGroup(addrs, "g", "one")
	gc.MaxPollRecords = 3
	gc.CommitInterval = time.Hour // only the exit commit may save progress
	var handled []int64
	err := kafka.RunGroup(ctxTimeout(t, 15*time.Second), gc, func(_ context.Context, recs []*kgo.Record) error {
		for _, r := range recs {
			if string(r.Value) == "5" {
				return errPoison
			}
		}
		for _, r := range recs {
			handled = append(handled, r.Offset)
		}
		return nil
	})
	if !errors.Is(err, errPoison) {
		t.Fatalf("RunGroup = %v, want the handler's error", err)
	}
	if len(handled) == 0 || len(handled) >= 6 || handled[len(handled)-1] >= 5 {
		t.Fatalf("first member handled offsets %v; expected some before offset 5", handled)
	}

	c := newCollector()
	r := runGroup(t, fastGroup(addrs, "g", "one"), c.handle)
	want := 10 - len(handled)
	waitFor(t, 15*time.Second, "second member catches up", func() bool { return c.count() >= want })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	got := c.positions()
	first := handled[len(handled)-1] + 1
	if len(got) != want || got[0].offset != first || got[len(got)-1].offset != 9 {
		t.Fatalf("second member got %v, want offsets %d..9 exactly once", got, first)
	}
}

// TestRevokedPartitionsCommitHandled: with autocommit effectively off, a
// second member joining takes partitions from the first; the first must
// commit what it handled on revocation or the second re-handles it.
func TestRevokedPartitionsCommitHandled(t *testing.T) {
	addrs := streamstest.Kafka(t, "t")
	p := newProducer(t, addrs, nil)
	if err := kafka.EnsureTopics(ctxTimeout(t, 5*time.Second), p.Client(), 4, 1, "four"); err != nil {
		t.Fatal(err)
	}
	produceN(t, p, "four", 0, 40)

	gc := fastGroup(addrs, "rv", "four")
	gc.CommitInterval = time.Hour
	a, b := newCollector(), newCollector()
	runGroup(t, gc, a.handle)
	waitFor(t, 15*time.Second, "first member handles phase 1", func() bool { return a.count() >= 40 })

	runGroup(t, gc, b.handle)
	adm := kadm.NewClient(p.Client())
	waitFor(t, 15*time.Second, "group stable with 2 members", func() bool {
		gs, err := adm.DescribeGroups(context.Background(), "rv")
		if err != nil {
			return false
		}
		g := gs["rv"]
		return g.State == "Stable" && len(g.Members) == 2 && assignedToAll(g)
	})
	produceN(t, p, "four", 40, 40)
	waitFor(t, 15*time.Second, "both members handle phase 2", func() bool { return a.count()+b.count() >= 80 })
	time.Sleep(100 * time.Millisecond) // let any duplicate show up

	all := append(a.positions(), b.positions()...)
	if b.count() == 0 {
		t.Fatal("second member got no records: no partitions moved")
	}
	slices.SortFunc(all, func(x, y pos) int {
		if x.partition != y.partition {
			return int(x.partition - y.partition)
		}
		return int(x.offset - y.offset)
	})
	if dup := firstDup(all); dup != nil {
		t.Fatalf("record %+v handled twice: revoked offsets were not committed", *dup)
	}
	if len(all) != 80 {
		t.Fatalf("handled %d records, want 80", len(all))
	}
}

func assignedToAll(g kadm.DescribedGroup) bool {
	for _, m := range g.Members {
		ca, ok := m.Assigned.AsConsumer()
		if !ok || len(ca.Topics) == 0 {
			return false
		}
	}
	return true
}

func firstDup(ps []pos) *pos {
	for i := 1; i < len(ps); i++ {
		if ps[i] == ps[i-1] {
			return &ps[i]
		}
	}
	return nil
}

func TestCancelDuringHandlerDoesNotCommitBatch(t *testing.T) {
	addrs := streamstest.Kafka(t, "t")
	p := newProducer(t, addrs, nil)
	if err := kafka.EnsureTopics(ctxTimeout(t, 5*time.Second), p.Client(), 1, 1, "c"); err != nil {
		t.Fatal(err)
	}
	produceN(t, p, "c", 0, 3)
	inHandler := make(chan struct{})
	var once sync.Once
	r := runGroup(t, fastGroup(addrs, "cg", "c"), func(ctx context.Context, _ []*kgo.Record) error {
		once.Do(func() { close(inHandler) })
		<-ctx.Done()
		return ctx.Err()
	})
	<-inHandler
	if err := r.stop(t); err != nil {
		t.Fatalf("RunGroup after cancel = %v, want nil", err)
	}
	offs, err := kadm.NewClient(p.Client()).FetchOffsets(ctxTimeout(t, 5*time.Second), "cg")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("c", 0); ok && o.At > 0 {
		t.Fatalf("offset %d committed for a batch whose handler was cancelled", o.At)
	}
}

func TestGroupConfigValidate(t *testing.T) {
	ok := kafka.DefaultGroupConfig("g", "t")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*kafka.GroupConfig){
		"no group":        func(c *kafka.GroupConfig) { c.Group = "" },
		"no topics":       func(c *kafka.GroupConfig) { c.Topics = nil },
		"no poll":         func(c *kafka.GroupConfig) { c.MaxPollRecords = 0 },
		"no commit":       func(c *kafka.GroupConfig) { c.CommitInterval = 0 },
		"hb over session": func(c *kafka.GroupConfig) { c.HeartbeatInterval = c.SessionTimeout },
		"bad client":      func(c *kafka.GroupConfig) { c.Client.Brokers = []string{"nohostport"} },
	}
	for name, mut := range cases {
		gc := kafka.DefaultGroupConfig("g", "t")
		mut(&gc)
		if err := kafka.RunGroup(t.Context(), gc, func(context.Context, []*kgo.Record) error { return nil }); err == nil {
			t.Errorf("%s: RunGroup accepted an invalid config", name)
		}
	}
	if err := kafka.RunGroup(t.Context(), ok, nil); err == nil {
		t.Error("RunGroup accepted a nil handler")
	}
}
