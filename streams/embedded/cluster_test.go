package embedded_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/streams/embedded"
)

func clusterConfig(dir string, nodes int) embedded.Config {
	cfg := testConfig(dir)
	cfg.KafkaListen = ""
	cfg.NATSCluster = nodes
	cfg.NATSClusterListen = "127.0.0.1:0"
	return cfg
}

// TestNATSClusterReplicatesKV is the contract of `ilb brokers
// --nats-cluster 3`: three clustered nodes, a bucket with three replicas
// spread over them, reachable through any node's URL.
func TestNATSClusterReplicatesKV(t *testing.T) {
	b := start(t, clusterConfig("", 3))
	urls := b.NATSURLs()
	if len(urls) != 3 || b.NATSURL() != strings.Join(urls, ",") || len(b.NATSServers()) != 3 {
		t.Fatalf("NATSURLs %v, NATSURL %q, %d servers; want 3 nodes", urls, b.NATSURL(), len(b.NATSServers()))
	}
	for _, s := range b.NATSServers() {
		if s.NumRoutes() == 0 {
			t.Errorf("node %s has no routes", s.Name())
		}
	}
	ctx := ctxTimeout(t)
	kv, err := jetStream(t, urls[0]).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ilb-weights", History: 8, Replicas: 3})
	if err != nil {
		t.Fatalf("R3 bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "fe-a", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	// Read back through another node.
	st, err := jetStream(t, urls[2]).Stream(ctx, "KV_ilb-weights")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v, want a leader and 2 replicas", info.Cluster)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}
}

// TestNATSClusterDataDirSurvivesRestart: the cluster's state lives in
// one directory per node under DataDir, and comes back with them.
func TestNATSClusterDataDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxTimeout(t)
	b1, err := embedded.Start(ctx, clusterConfig(dir, 3))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := jetStream(t, b1.NATSURL()).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 4, Replicas: 3})
	if err == nil {
		_, err = kv.Put(ctx, "k", []byte("kept"))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := start(t, clusterConfig(dir, 3))
	var (
		e    jetstream.KeyValueEntry
		last error
	)
	// The nodes elect the meta leader, then the stream's leader, again
	// before it answers: each election takes 4-9 s (nats-server's raft
	// timeouts).
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	js := jetStream(t, b2.NATSURL())
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		kv2, err := js.KeyValue(actx, "b")
		if err == nil {
			e, err = kv2.Get(actx, "k")
		}
		acancel()
		if err == nil {
			break
		}
		last = err
		if ctx.Err() != nil {
			t.Fatalf("bucket after a cluster restart: %v (last error %v)", ctx.Err(), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(e.Value()) != "kept" {
		t.Fatalf("after restart got %q", e.Value())
	}
}

func TestNATSClusterValidate(t *testing.T) {
	cases := map[string]func(*embedded.Config){
		"too many nodes":         func(c *embedded.Config) { c.NATSCluster = 10 },
		"negative":               func(c *embedded.Config) { c.NATSCluster = -1 },
		"routes without cluster": func(c *embedded.Config) { c.NATSRoutes = []string{"nats://127.0.0.1:6222"} },
		"one node, no routes":    func(c *embedded.Config) { c.NATSCluster = 1 },
		"bad route":              func(c *embedded.Config) { c.NATSCluster, c.NATSRoutes = 1, []string{"::"} },
		"bad cluster listen":     func(c *embedded.Config) { c.NATSCluster, c.NATSClusterListen = 3, "6222" },
		"cluster without nats":   func(c *embedded.Config) { c.NATSCluster, c.NATSListen = 3, "" },
		"ports beyond 65535":     func(c *embedded.Config) { c.NATSCluster, c.NATSListen = 3, "127.0.0.1:65534" },
	}
	for name, mut := range cases {
		c := embedded.DefaultConfig()
		mut(&c)
		if _, err := embedded.Start(t.Context(), c); err == nil {
			t.Errorf("%s: Start accepted %+v", name, c)
		}
	}
}

// TestNATSClusterOneNodePerProcess is `ilb brokers --nats-cluster 1
// --nats-routes A,B,C` run three times, as an operator runs one node per
// machine: each lists every node, its own included (given twice, it would
// make nats-server expect a fourth peer), and the three form one
// JetStream cluster that places an R3 bucket.
func TestNATSClusterOneNodePerProcess(t *testing.T) {
	var addrs, routes []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		routes = append(routes, "nats://"+ln.Addr().String())
		ln.Close()
	}
	var servers []*server.Server
	var urls []string
	for i := range 3 {
		cfg := clusterConfig("", 1)
		cfg.NATSName = fmt.Sprintf("node%d", i)
		cfg.NATSClusterListen, cfg.NATSRoutes = addrs[i], routes
		b := start(t, cfg)
		servers = append(servers, b.NATSServers()...)
		urls = append(urls, b.NATSURL())
	}
	if err := embedded.WaitJetStreamCluster(servers, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t)
	kv, err := jetStream(t, strings.Join(urls, ",")).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3})
	if err == nil {
		_, err = kv.Put(ctx, "k", []byte("v"))
	}
	if err != nil {
		t.Fatalf("R3 bucket over three one-node brokers: %v", err)
	}
}
