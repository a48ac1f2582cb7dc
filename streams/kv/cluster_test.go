package kv_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestWatchAcrossClusterNodeLoss: a watcher on a three-node cluster with
// an R3 bucket keeps getting updates when its own node goes away (its
// connection moves to another node and the watch is made again) and when
// the node leading the bucket's stream goes away (a new leader is
// elected). Each time the next write reaches it within seconds, and
// nothing it delivers goes back.
func TestWatchAcrossClusterNodeLoss(t *testing.T) {
	for _, which := range []string{"watcher's node", "consumer's node", "stream leader"} {
		t.Run(which, func(t *testing.T) {
			c := streamstest.NewNATSCluster(t, 3)
			wcfg := kv.DefaultConfig()
			wcfg.URL, wcfg.ReconnectWait, wcfg.PingInterval = c.URL(), 20*time.Millisecond, 500*time.Millisecond
			wnc, wjs, err := kv.Connect(t.Context(), wcfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(wnc.Close)
			_, pjs := connect(t, c.URL())
			bc := kv.DefaultBucketConfig("ilb-weights")
			bc.Replicas = 3
			ctx := ctxTimeout(t, 60*time.Second)
			pb, err := kv.EnsureBucket(ctx, pjs, bc)
			if err != nil {
				t.Fatal(err)
			}
			wb, err := wjs.KeyValue(ctx, "ilb-weights")
			if err != nil {
				t.Fatal(err)
			}
			ev := newEvents()
			startWatch(t, wb, "fe", ev, kv.RewatchOnReconnect(wnc))
			put := func(v int) {
				t.Helper()
				for {
					actx, cancel := context.WithTimeout(ctx, time.Second)
					_, err := pb.Put(actx, "fe", fmt.Appendf(nil, "%03d", v))
					cancel()
					if err == nil {
						return
					}
					if ctx.Err() != nil {
						t.Fatalf("put %d: %v", v, err)
					}
				}
			}
			put(1)
			ev.waitLen(t, 2) // DONE, then 001 (or 001 first)
			victim := c.Index(wnc.ConnectedServerName())
			switch which {
			case "stream leader":
				victim = c.StreamLeader("KV_ilb-weights", 10*time.Second)
			case "consumer's node":
				victim = consumerNode(t, c, pjs)
			}
			if victim < 0 {
				t.Fatalf("no node to stop (watcher on %q)", wnc.ConnectedServerName())
			}
			c.Stop(victim)
			stopped := time.Now()
			put(2)
			got := waitValue(t, ev, "put:fe=002", 30*time.Second)
			if took := time.Since(stopped); took > 10*time.Second {
				t.Errorf("the write after the stop took %v to reach the watcher; want under 10 s", took)
			}
			t.Logf("%s (%s) stopped: the next write reached the watcher after %v; watcher now on %s",
				which, c.Name(victim), time.Since(stopped).Round(10*time.Millisecond), wnc.ConnectedServerName())
			last := ""
			for _, e := range got {
				if e != "DONE" && e < last {
					t.Errorf("delivered %s after %s: went back", e, last)
				}
				last = max(last, e)
			}
			if which == "watcher's node" && wnc.ConnectedServerName() == c.Name(victim) {
				t.Errorf("watcher still on the stopped node %s", c.Name(victim))
			}
		})
	}
}

// consumerNode returns the index of the node hosting the bucket's one
// consumer (the watcher's ordered consumer).
func consumerNode(t *testing.T, c *streamstest.NATSCluster, js jetstream.JetStream) int {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	st, err := js.Stream(ctx, "KV_ilb-weights")
	if err != nil {
		t.Fatal(err)
	}
	lister := st.ListConsumers(ctx)
	var nodes []int
	for ci := range lister.Info() {
		if ci.Cluster != nil {
			nodes = append(nodes, c.Index(ci.Cluster.Leader))
		}
	}
	if err := lister.Err(); err != nil || len(nodes) != 1 || nodes[0] < 0 {
		t.Fatalf("consumers of KV_ilb-weights on nodes %v (%v); want one", nodes, err)
	}
	return nodes[0]
}

// waitValue waits until ev has delivered want and returns all delivered.
func waitValue(t *testing.T, ev *events, want string, d time.Duration) []string {
	t.Helper()
	deadline := time.After(d)
	for {
		got := ev.snapshot()
		for _, e := range got {
			if e == want {
				return got
			}
		}
		select {
		case <-ev.ch:
		case <-deadline:
			t.Fatalf("%s not delivered within %v; have %v", want, d, got)
		}
	}
}

// TestWatchStallCheckRecoversLostConsumer: the watcher's consumer is
// deleted behind its back (as when its node goes away): the next write is
// delivered within two stall checks, not after nats.go's heartbeat
// timeout; with the check off, it is not delivered in that time.
func TestWatchStallCheckRecoversLostConsumer(t *testing.T) {
	for _, every := range []time.Duration{200 * time.Millisecond, 0} {
		t.Run(fmt.Sprintf("every %v", every), func(t *testing.T) {
			_, js := connect(t, streamstest.NATS(t))
			b := bucket(t, js, 8)
			ctx := ctxTimeout(t, 20*time.Second)
			b.Put(ctx, "fe", []byte("001"))
			ev := newEvents()
			startWatch(t, b, "fe", ev, kv.StallCheck(every))
			waitValue(t, ev, "put:fe=001", 5*time.Second)
			st, err := js.Stream(ctx, "KV_ilb-weights")
			if err != nil {
				t.Fatal(err)
			}
			for name := range st.ListConsumers(ctx).Info() {
				if err := st.DeleteConsumer(ctx, name.Name); err != nil {
					t.Fatal(err)
				}
			}
			b.Put(ctx, "fe", []byte("002"))
			deadline := time.Now().Add(3 * time.Second)
			delivered := false
			for !delivered && time.Now().Before(deadline) {
				delivered = slices.Contains(ev.snapshot(), "put:fe=002")
				time.Sleep(20 * time.Millisecond)
			}
			if delivered != (every > 0) {
				t.Errorf("stall check %v: delivered within 3 s: %v", every, delivered)
			}
		})
	}
}
