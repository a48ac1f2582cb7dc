package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kv"
)

// natsNodes is a NATS cluster of `ilb brokers --nats-cluster 1` processes,
// one node each, as an operator would run one per machine: each node can
// be killed (SIGKILL), paused (SIGSTOP) and restarted on its ports with its
// store, independently of the others and of the test process.
type natsNodes struct {
	bin     string
	dir     string
	clients []int // client port of each node
	routes  []int // route port of each node
	procs   []*proc
	paused  []bool
}

// startNATSNodes starts n node processes and waits until the cluster
// holds the weights bucket with n replicas (at most 3).
func startNATSNodes(t *testing.T, bin string, n int) *natsNodes {
	t.Helper()
	c := &natsNodes{bin: bin, dir: t.TempDir(), clients: freeTCPPorts(t, n), routes: freeTCPPorts(t, n),
		procs: make([]*proc, n), paused: make([]bool, n)}
	for i := range n {
		c.start(t, i)
	}
	// A paused node would hold up the stop of its process: go on first.
	t.Cleanup(func() {
		for i := range c.procs {
			c.resume(t, i)
		}
	})
	c.ensureBucket(t, min(n, 3))
	return c
}

func (c *natsNodes) name(i int) string { return "n" + strconv.Itoa(i) }

// index returns the node named name; -1 if none.
func (c *natsNodes) index(name string) int {
	for i := range c.procs {
		if c.name(i) == name {
			return i
		}
	}
	return -1
}

// url is every node's client URL, comma-separated (what --nats takes).
func (c *natsNodes) url() string {
	urls := make([]string, len(c.clients))
	for i := range c.clients {
		urls[i] = c.nodeURL(i)
	}
	return strings.Join(urls, ",")
}

func (c *natsNodes) nodeURL(i int) string { return "nats://127.0.0.1:" + strconv.Itoa(c.clients[i]) }

// start runs node i (again, after a kill) on its ports with its store.
func (c *natsNodes) start(t *testing.T, i int) {
	t.Helper()
	var routes []string
	for _, p := range c.routes {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	p := startProc(t, c.bin, c.name(i), "brokers", "--kafka-listen", "", "--nats-cluster", "1", "--nats-name", c.name(i),
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(c.clients[i]), "--nats-cluster-listen", "127.0.0.1:"+strconv.Itoa(c.routes[i]),
		"--nats-routes", strings.Join(routes, ","), "--data-dir", filepath.Join(c.dir, c.name(i)))
	p.waitMatch(t, `ready;`)
	c.procs[i] = p
}

// kill sends node i SIGKILL: no shutdown, no hand-off of what it leads.
func (c *natsNodes) kill(t *testing.T, i int) { c.procs[i].kill(t) }

// pause stops node i (SIGSTOP): its connections stay open, it answers
// nothing, as a node cut off by the network.
func (c *natsNodes) pause(t *testing.T, i int) {
	t.Helper()
	if err := c.procs[i].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause %s: %v", c.name(i), err)
	}
	c.paused[i] = true
}

func (c *natsNodes) resume(t *testing.T, i int) {
	t.Helper()
	if c.paused[i] {
		_ = c.procs[i].cmd.Process.Signal(syscall.SIGCONT)
		c.paused[i] = false
	}
}

// ensureBucket creates the weights bucket with the given replicas, as
// soon as the cluster can place it.
func (c *natsNodes) ensureBucket(t *testing.T, replicas int) {
	t.Helper()
	_, js := connectNATSKV(t, natsConfig(c.url(), "test-admin"))
	bc := kv.DefaultBucketConfig(schemas.BucketWeights)
	bc.Replicas = replicas
	var err error
	ok := waitFor(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = kv.EnsureBucket(ctx, js, bc)
		return err == nil
	})
	if !ok {
		t.Fatalf("weights bucket with %d replicas on the NATS nodes: %v", replicas, err)
	}
}

// leader returns the node leading the weights bucket's stream, asking the
// nodes that run (not paused); -1 when none names one within d.
func (c *natsNodes) leader(t *testing.T, d time.Duration) int {
	t.Helper()
	leader := -1
	waitFor(d, func() bool {
		for i := range c.procs {
			if !c.paused[i] && c.procs[i].running() {
				if name := streamLeaderAt(c.nodeURL(i), "KV_"+schemas.BucketWeights); name != "" {
					leader = c.index(name)
					return true
				}
			}
		}
		return false
	})
	return leader
}

// streamLeaderAt asks the server at url which node leads stream; "" when
// it cannot tell.
func streamLeaderAt(url, stream string) string {
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
	if err != nil || st.CachedInfo().Cluster == nil {
		return ""
	}
	return st.CachedInfo().Cluster.Leader
}

// freeTCPPorts returns n distinct ports of 127.0.0.1 that were free a
// moment ago.
func freeTCPPorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out
}

// versionsIn returns the snapshot versions in the kept history of
// cluster's key, oldest revision first.
func versionsIn(t *testing.T, natsURL, cluster string) []uint64 {
	t.Helper()
	_, js := connectNATSKV(t, natsConfig(natsURL, "test-history"))
	var out []uint64
	var err error
	ok := waitFor(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		b, e := js.KeyValue(ctx, schemas.BucketWeights)
		if e != nil {
			err = e
			return false
		}
		es, e := kv.History(ctx, b, cluster)
		if e != nil {
			err = e
			return false
		}
		out = out[:0]
		for _, en := range es {
			s, e := schemas.DecodeSnapshot(en.Value)
			if e != nil {
				err = fmt.Errorf("revision %d: %w", en.Revision, e)
				return false
			}
			out = append(out, s.Version)
		}
		return true
	})
	if !ok {
		t.Fatalf("history of %s: %v", cluster, err)
	}
	return out
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// historyHolding reads cluster's snapshot history until it holds every
// version of acked it can hold (missing), for up to within: a read may be
// answered by a replica still catching up after a fault (direct gets
// serve a replica's own copy), which lists fewer revisions for a moment.
// A version that never appears is lost, and the caller reports it.
func historyHolding(t *testing.T, natsURL, cluster string, acked []uint64, within time.Duration) []uint64 {
	t.Helper()
	var history []uint64
	waitFor(within, func() bool {
		history = versionsIn(t, natsURL, cluster)
		lost, _ := missing(acked, history)
		return len(lost) == 0
	})
	return history
}
