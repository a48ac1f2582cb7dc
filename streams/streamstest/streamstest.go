// Package streamstest gives tests real brokers in process: a
// Kafka-protocol broker (kfake) and a NATS server with JetStream, each on
// a random TCP port of 127.0.0.1 and stopped when the test ends. Tests
// talk to them with the same clients production uses; nothing here mocks
// a protocol.
//
// Kafka and NATS start a broker for the whole test. NewKafkaServer and
// NewNATSServer return handles that can be stopped and restarted on the
// same port, for fault tests: clients see a broker go away and come back
// at the same address. JetStream keeps its state across a restart (its
// store directory is kept). Kafka keeps its log across a restart only when
// given a data directory; without one it comes back empty, as a real
// broker that lost its disk would.
//
// NewNATSCluster starts several clustered NATS nodes (each its own
// JetStream store) whose nodes stop and restart one at a time, for tests
// of replicated buckets; StreamLeader says which node leads a stream.
//
// KafkaClient gives a franz-go client of such a broker that closes with
// the test. Tests of credentials get a NATS server that admits only given
// users (NATSWithUsers) or one configured in full (NATSWithOptions:
// accounts, operator trust, TLS). LogBuffer collects the logs and output
// that services and clients write from their own goroutines, for the test
// to search.
//
// # Concurrency
//
// Call the functions and methods from the test's goroutine (they may call
// t.Fatal). The brokers themselves serve any number of clients. A
// LogBuffer may be written and read from any goroutine.
package streamstest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/streams/embedded"
)

// Partitions is the partition count of the topics these brokers create.
const Partitions = 3

// Kafka starts a Kafka-protocol broker for the rest of the test and returns
// its bootstrap addresses. topics are created up front (none: ilb's
// default topics); other topics are created on first use.
func Kafka(t testing.TB, topics ...string) []string {
	t.Helper()
	return NewKafkaServer(t, "", topics...).Addrs()
}

// NATS starts a NATS server with JetStream, storing in a temporary
// directory, for the rest of the test and returns its URL.
func NATS(t testing.TB) string {
	t.Helper()
	return NewNATSServer(t, "").URL()
}

// server is a restartable embedded broker.
type server struct {
	t   testing.TB
	cfg embedded.Config // exactly one of KafkaListen and NATSListen is set
	b   *embedded.Brokers
}

func newServer(t testing.TB, cfg embedded.Config) *server {
	s := &server{t: t, cfg: cfg}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := embedded.Start(ctx, s.cfg)
	if err != nil {
		s.t.Fatalf("streamstest: start broker: %v", err)
	}
	s.b = b
}

// pinPort rewrites the listen address to the port the broker got, so a
// restart comes back at the same address.
func (s *server) pinPort(addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		s.t.Fatalf("streamstest: broker address %q: %v", addr, err)
	}
	pinned := net.JoinHostPort("127.0.0.1", port)
	if s.cfg.KafkaListen != "" {
		s.cfg.KafkaListen = pinned
	} else {
		s.cfg.NATSListen = pinned
	}
}

func (s *server) stop() {
	if s.b == nil {
		return
	}
	err := s.b.Close()
	s.b = nil
	if err != nil {
		s.t.Errorf("streamstest: stop broker: %v", err)
	}
}

func (s *server) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

// KafkaServer is a restartable Kafka-protocol broker.
type KafkaServer struct {
	s    *server
	addr string
}

// NewKafkaServer starts a Kafka-protocol broker for the rest of the test.
// With dir non-empty its log and committed offsets live there and survive
// Restart; with dir empty they are in memory and Restart loses them.
func NewKafkaServer(t testing.TB, dir string, topics ...string) *KafkaServer {
	t.Helper()
	cfg := baseConfig()
	cfg.KafkaListen = "127.0.0.1:0"
	cfg.DataDir = dir
	if len(topics) > 0 {
		cfg.Topics = topics
	}
	k := &KafkaServer{s: newServer(t, cfg)}
	k.addr = k.s.b.KafkaAddrs()[0]
	k.s.pinPort(k.addr)
	return k
}

// Addrs returns the broker's bootstrap addresses; they do not change on
// Restart.
func (k *KafkaServer) Addrs() []string { return []string{k.addr} }

// Stop stops the broker until Restart; clients see connections refused.
// Stopping a stopped broker does nothing.
func (k *KafkaServer) Stop() { k.s.stop() }

// Restart stops the broker if it runs and starts it again on the same
// port (with its log only when it has a data directory).
func (k *KafkaServer) Restart() { k.s.t.Helper(); k.s.restart() }

// NATSServer is a restartable NATS server with JetStream.
type NATSServer struct {
	s   *server
	url string
}

// NewNATSServer starts a NATS server with JetStream storing in dir (a
// temporary directory when empty) for the rest of the test. Its streams
// and KV buckets survive Restart.
func NewNATSServer(t testing.TB, dir string) *NATSServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := baseConfig()
	cfg.NATSListen = "127.0.0.1:0"
	cfg.DataDir = dir
	n := &NATSServer{s: newServer(t, cfg)}
	n.url = n.s.b.NATSURL()
	n.s.pinPort(strings.TrimPrefix(n.url, "nats://"))
	return n
}

// URL returns the server's nats:// URL; it does not change on Restart.
func (n *NATSServer) URL() string { return n.url }

// Stop stops the server until Restart; clients go into reconnecting.
// Stopping a stopped server does nothing.
func (n *NATSServer) Stop() { n.s.stop() }

// Restart stops the server if it runs and starts it again on the same port
// with the same JetStream store.
func (n *NATSServer) Restart() { n.s.t.Helper(); n.s.restart() }

// Port returns the server's TCP port.
func (n *NATSServer) Port() int {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(n.url, "nats://"))
	p, _ := strconv.Atoi(port)
	return p
}

func baseConfig() embedded.Config {
	cfg := embedded.DefaultConfig()
	cfg.KafkaListen = ""
	cfg.NATSListen = ""
	cfg.Partitions = Partitions
	return cfg
}

// KafkaClient returns a franz-go client seeded with addrs (as Kafka or
// KafkaServer.Addrs give) and configured by opts; it closes when the test
// ends.
func KafkaClient(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatalf("streamstest: kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}
