package kafka_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/kafka"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func clientConfig(addrs []string) kafka.ClientConfig {
	cc := kafka.DefaultClientConfig()
	cc.Brokers = addrs
	return cc
}

// fastGroup is a group config with short timers so that rebalances in
// tests take milliseconds, not seconds.
func fastGroup(addrs []string, group string, topics ...string) kafka.GroupConfig {
	gc := kafka.DefaultGroupConfig(group, topics...)
	gc.Client = clientConfig(addrs)
	gc.HeartbeatInterval = 100 * time.Millisecond
	gc.SessionTimeout = 6 * time.Second // kfake's minimum
	return gc
}

func newProducer(t *testing.T, addrs []string, mut func(*kafka.ProducerConfig)) *kafka.Producer {
	t.Helper()
	pc := kafka.DefaultProducerConfig()
	if mut != nil {
		mut(&pc)
	}
	p, err := kafka.NewProducer(clientConfig(addrs), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// pos is a record position.
type pos struct {
	partition int32
	offset    int64
}

// collector records what a handler saw.
type collector struct {
	mu   sync.Mutex
	recs []*kgo.Record
	seen chan struct{} // receives after every batch
}

func newCollector() *collector { return &collector{seen: make(chan struct{}, 1000)} }

func (c *collector) handle(_ context.Context, recs []*kgo.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, recs...)
	c.mu.Unlock()
	c.seen <- struct{}{}
	return nil
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

func (c *collector) positions() []pos {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]pos, len(c.recs))
	for i, r := range c.recs {
		ps[i] = pos{r.Partition, r.Offset}
	}
	slices.SortFunc(ps, func(a, b pos) int {
		if a.partition != b.partition {
			return int(a.partition - b.partition)
		}
		return int(a.offset - b.offset)
	})
	return ps
}

// waitFor waits until cond holds or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running is a RunGroup in its own goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when RunGroup returned
	err    error         // RunGroup's result, set before done is closed
}

// runGroup starts RunGroup; the test's cleanup stops it.
func runGroup(t *testing.T, gc kafka.GroupConfig, h kafka.Handler) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = kafka.RunGroup(ctx, gc, h)
		close(r.done)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels RunGroup and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		t.Fatal("RunGroup did not return within 15s of cancel")
	}
	return r.err
}
