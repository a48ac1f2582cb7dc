package streamstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/streams/embedded"
)

// NATSCluster is a cluster of NATS servers with JetStream on 127.0.0.1,
// each with its own store directory, whose nodes can be stopped and
// restarted one at a time on the same ports with the same store.
type NATSCluster struct {
	t     testing.TB
	nodes []embedded.NATSNode  // Listen pinned to the port each node got
	srv   []*natsserver.Server // nil while a node is stopped
	urls  []string
}

// NewNATSCluster starts n clustered NATS nodes (named node-0..) for the
// rest of the test and waits until the cluster can place streams on all
// of them. Stopping a node is a clean shutdown (it hands off the raft
// groups it leads); for a crash, run nodes as processes (`ilb brokers
// --nats-cluster 1`) and kill them.
func NewNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	if n < 2 {
		t.Fatalf("streamstest: a NATS cluster of %d nodes; want 2 or more", n)
	}
	c := &NATSCluster{t: t}
	t.Cleanup(func() {
		for i := range c.srv {
			c.Stop(i)
		}
	})
	for attempt := 1; ; attempt++ {
		err := c.startAll(n)
		if err == nil {
			break
		}
		for i := range c.srv {
			c.Stop(i)
		}
		if !addrInUse(err) || attempt == startAttempts {
			t.Fatalf("streamstest: %v", err)
		}
		t.Logf("streamstest: %v; starting the cluster again on other ports (attempt %d of %d)", err, attempt+1, startAttempts)
	}
	c.WaitReady(30 * time.Second)
	return c
}

// startAttempts is how many times NewNATSCluster starts its nodes on
// fresh ports when a route port it picked was taken before a node could
// bind it: the ports are free when picked and bound a moment later, and
// other tests (go test runs packages in parallel) open ports in between.
const startAttempts = 5

// pickPorts picks the nodes' route ports (freePorts; tests replace it).
var pickPorts = freePorts

// startAll starts n nodes on route ports from pickPorts, each with a new
// store directory; the first node that fails ends it with its error.
func (c *NATSCluster) startAll(n int) error {
	routePorts := pickPorts(c.t, n)
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	dir := c.t.TempDir()
	c.srv, c.urls, c.nodes = make([]*natsserver.Server, n), make([]string, n), nil
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		c.nodes = append(c.nodes, embedded.NATSNode{Name: name, Listen: "127.0.0.1:0", ClusterName: "ilb-test",
			ClusterListen: "127.0.0.1:" + strconv.Itoa(routePorts[i]), Routes: routes,
			StoreDir: filepath.Join(dir, name), SyncAlways: true, StartTimeout: 10 * time.Second,
			RoutePing: embedded.DefaultRoutePing})
	}
	for i := range n {
		s, err := embedded.StartNATSNode(c.nodes[i])
		if err != nil {
			return fmt.Errorf("start nats %s: %w", c.nodes[i].Name, err)
		}
		c.srv[i] = s
		c.urls[i] = "nats://" + s.Addr().String()
		c.nodes[i].Listen = s.Addr().String()
	}
	return nil
}

// addrInUse reports whether err is a listener's "address already in use"
// (the embedded server's errors carry it as text).
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a
// moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("streamstest: free port: %v", err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out
}

func (c *NATSCluster) start(i int) {
	c.t.Helper()
	s, err := embedded.StartNATSNode(c.nodes[i])
	if err != nil {
		c.t.Fatalf("streamstest: start nats %s: %v", c.nodes[i].Name, err)
	}
	c.srv[i] = s
}

// URL returns every node's URL, comma-separated (the form services take).
func (c *NATSCluster) URL() string { return strings.Join(c.urls, ",") }

// URLs returns each node's URL; they do not change on Restart.
func (c *NATSCluster) URLs() []string { return append([]string(nil), c.urls...) }

// Name returns node i's server name.
func (c *NATSCluster) Name(i int) string { return c.nodes[i].Name }

// Index returns the index of the node named name; -1 if none is.
func (c *NATSCluster) Index(name string) int {
	for i, n := range c.nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// Server returns node i's server; nil while it is stopped.
func (c *NATSCluster) Server(i int) *natsserver.Server { return c.srv[i] }

// Stop shuts node i down until Restart; stopping a stopped node does
// nothing.
func (c *NATSCluster) Stop(i int) {
	if s := c.srv[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.srv[i] = nil
	}
}

// Restart stops node i if it runs and starts it again on the same ports
// with the same store.
func (c *NATSCluster) Restart(i int) {
	c.t.Helper()
	c.Stop(i)
	c.start(i)
}

// WaitReady waits up to d until a meta leader sees every running node.
func (c *NATSCluster) WaitReady(d time.Duration) {
	c.t.Helper()
	if err := embedded.WaitJetStreamCluster(c.srv, d); err != nil {
		c.t.Fatalf("streamstest: %v", err)
	}
}

// StreamLeader returns the index of the node leading stream (e.g.
// "KV_ilb-weights"), asking the running nodes; -1 when none answers with
// a leader within d.
func (c *NATSCluster) StreamLeader(stream string, d time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for i, s := range c.srv {
			if s == nil {
				continue
			}
			if name := streamLeader(c.urls[i], stream); name != "" {
				return c.Index(name)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// streamLeader asks the server at url which node leads stream; "" when it
// cannot tell.
func streamLeader(url, stream string) string {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.MaxReconnects(0))
	if err != nil {
		return ""
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info := st.CachedInfo()
	if info == nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}
