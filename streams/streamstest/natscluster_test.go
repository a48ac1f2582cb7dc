package streamstest_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestNATSClusterSurvivesLeaderStop: an R3 bucket on three nodes keeps
// its writes and takes new ones when the node leading it stops, and the
// node comes back on the same port with its store.
func TestNATSClusterSurvivesLeaderStop(t *testing.T) {
	c := streamstest.NewNATSCluster(t, 3)
	ctx := ctxTimeout(t)
	nc, err := nats.Connect(c.URL(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "w", History: 8, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	leader := c.StreamLeader("KV_w", 10*time.Second)
	if leader < 0 {
		t.Fatal("no leader for KV_w")
	}
	url := c.URLs()[leader]
	c.Stop(leader)
	if c.Server(leader) != nil {
		t.Fatal("Server of a stopped node is not nil")
	}
	// A new leader is elected among the other two; writes go on.
	var rev uint64
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		rev, err = kv.Put(actx, "k", []byte("v2"))
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no write after the leader stopped: %v", err)
		}
	}
	if now := c.StreamLeader("KV_w", 10*time.Second); now == leader || now < 0 {
		t.Fatalf("leader after the stop: node %d (stopped: %d)", now, leader)
	}
	c.Restart(leader)
	if c.URLs()[leader] != url {
		t.Fatalf("node %d came back at %s, was %s", leader, c.URLs()[leader], url)
	}
	c.WaitReady(30 * time.Second)
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v2" || e.Revision() != rev {
		t.Fatalf("after the restart: %v, %v; want v2 at revision %d", e, err, rev)
	}
}

// TestNATSClusterRetriesTakenPorts: when a route port picked for a node
// is taken before the node binds it (another test opened it in between),
// the cluster starts again on other ports instead of failing the test.
func TestNATSClusterRetriesTakenPorts(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	calls := 0
	streamstest.SetPickPorts(t, func(t testing.TB, n int) []int {
		calls++
		ports := streamstest.FreePorts(t, n)
		if calls == 1 {
			ports[1] = taken // node-1's port is taken when it starts
		}
		return ports
	})
	c := streamstest.NewNATSCluster(t, 3)
	if calls != 2 {
		t.Fatalf("ports picked %d times, want 2 (the first set had a taken port)", calls)
	}
	nc, err := nats.Connect(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctxTimeout(t), jetstream.KeyValueConfig{Bucket: "w", Replicas: 3})
	if err != nil {
		t.Fatalf("an R3 bucket on the restarted cluster: %v", err)
	}
	if _, err := kv.Put(ctxTimeout(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}
