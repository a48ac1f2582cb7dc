package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// DefaultTopics are the Kafka topics Start pre-creates unless Config.Topics
// says otherwise.
func DefaultTopics() []string {
	return []string{schemas.TopicSignals, schemas.TopicSignalsDLQ, schemas.TopicFeatures, schemas.TopicProfiles}
}

// Config says which brokers to run and where.
type Config struct {
	// KafkaListen is the host:port of the Kafka-protocol broker; port 0
	// picks a free port. Empty runs no Kafka broker.
	KafkaListen string
	// KafkaAdvertiseHost is the host the broker tells clients to connect
	// to (Kafka metadata). Empty means the listen host, or 127.0.0.1 when
	// the listen host is unspecified (":9092", "0.0.0.0:9092"); set it to
	// a reachable name when other machines connect.
	KafkaAdvertiseHost string
	// NATSListen is the host:port of the NATS server; port 0 picks a free
	// port. Empty runs no NATS server.
	NATSListen string
	// NATSName is the NATS server name (default "ilb-embedded"); the nodes
	// of an in-process cluster are NAME-0, NAME-1, ... It must be unique
	// in a cluster and the same across restarts.
	NATSName string
	// NATSCluster runs that many NATS nodes in this process, clustered
	// with each other and with NATSRoutes (their client ports are
	// NATSListen's port and the next ones, or each a free port for port
	// 0). 0, the default, runs one server outside any cluster; 1 runs one
	// cluster node whose peers are NATSRoutes (one node per process).
	NATSCluster int
	// NATSClusterName names the cluster (default "ilb"); NATSClusterListen
	// is the first node's route listener (DefaultNATSClusterListen; the
	// next nodes take the next ports, or each a free port for port 0).
	NATSClusterName   string
	NATSClusterListen string
	// NATSRoutes are route URLs (nats://host:port) of cluster nodes
	// outside this process.
	NATSRoutes []string
	// DataDir keeps broker state across restarts: JetStream in
	// DataDir/jetstream, the Kafka log in DataDir/kafka. Empty keeps Kafka
	// in memory and JetStream in a temporary directory removed on Close.
	DataDir string
	// Partitions is the partition count of the pre-created topics and of
	// topics created on demand.
	Partitions int
	// Topics are pre-created at first start; nil means DefaultTopics.
	Topics []string
	// SyncAlways fsyncs every JetStream write and every Kafka batch: no
	// acknowledged write is lost on a machine crash, at a cost in speed.
	// Clusters want it: with the default (sync every two minutes) a node
	// that crashes can come back without writes the cluster acknowledged
	// (Jepsen, NATS 2.12.1), and lose them for good if its peers fail too.
	SyncAlways bool
	// ShutdownTimeout bounds Close.
	ShutdownTimeout time.Duration
	// StartTimeout bounds how long Start waits for NATS to accept clients
	// (and three times it, for an in-process cluster to elect its leader).
	StartTimeout time.Duration
	// Logger receives the brokers' logs; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns the configuration of `ilb brokers`: both brokers on
// their standard local ports, state in memory.
func DefaultConfig() Config {
	return Config{
		KafkaListen:       "127.0.0.1:9092",
		NATSListen:        "127.0.0.1:4222",
		NATSClusterListen: DefaultNATSClusterListen,
		Partitions:        4,
		ShutdownTimeout:   10 * time.Second,
		StartTimeout:      10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if c.KafkaListen == "" && c.NATSListen == "" {
		return errors.New("embedded: neither Kafka nor NATS is configured to listen")
	}
	if err := checkListen("kafka listen", c.KafkaListen); err != nil {
		return err
	}
	if err := checkListen("nats listen", c.NATSListen); err != nil {
		return err
	}
	switch {
	case c.Partitions < 1 || c.Partitions > 1000:
		return fmt.Errorf("embedded: partitions %d out of range [1, 1000]", c.Partitions)
	case c.ShutdownTimeout <= 0:
		return fmt.Errorf("embedded: shutdown timeout %v must be positive", c.ShutdownTimeout)
	case c.StartTimeout <= 0:
		return fmt.Errorf("embedded: start timeout %v must be positive", c.StartTimeout)
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	for _, t := range c.Topics {
		if err := schemas.ValidTopicName(t); err != nil {
			return fmt.Errorf("embedded: %w", err)
		}
	}
	return nil
}

func (c Config) validateCluster() error {
	switch {
	case c.NATSCluster < 0 || c.NATSCluster > maxNATSCluster:
		return fmt.Errorf("embedded: nats cluster of %d nodes out of range [0, %d]", c.NATSCluster, maxNATSCluster)
	case c.NATSCluster > 0 && c.NATSListen == "":
		return errors.New("embedded: a nats cluster needs a nats listen address")
	case c.NATSCluster == 0 && len(c.NATSRoutes) > 0:
		return errors.New("embedded: nats routes without a nats cluster; set the number of nodes to run here (1 for one node per process)")
	case c.NATSCluster == 1 && len(c.NATSRoutes) == 0:
		return errors.New("embedded: a nats cluster of one node needs routes to its peers")
	case c.NATSCluster == 0:
		return nil
	}
	if err := checkListen("nats cluster listen", c.NATSClusterListen); err != nil {
		return err
	}
	if c.NATSClusterListen == "" {
		return errors.New("embedded: a nats cluster needs a cluster listen address")
	}
	for _, r := range c.NATSRoutes {
		if u, err := url.Parse(r); err != nil || u.Host == "" {
			return fmt.Errorf("embedded: nats route %q is not nats://host:port", r)
		}
	}
	return nil
}

func (c Config) topics() []string {
	if c.Topics == nil {
		return DefaultTopics()
	}
	return c.Topics
}

// checkListen validates a host:port listen address; empty is allowed (the
// broker is off).
func checkListen(what, addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("embedded: %s %q: %w", what, addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("embedded: %s %q: port must be a number in [0, 65535]", what, addr)
	}
	return nil
}

// reachableHost turns an unspecified listen host ("", "0.0.0.0", "::")
// into the loopback address, which reaches the listener from this machine.
func reachableHost(host string) string {
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "127.0.0.1"
	}
	return host
}
