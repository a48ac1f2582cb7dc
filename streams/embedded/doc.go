// Package embedded runs ilb's brokers inside the process: a Kafka-protocol
// broker (franz-go's kfake) and a NATS server with JetStream, each on a real
// TCP port, so real clients (franz-go, kcat, the nats CLI) work against them
// unchanged. It is the local default behind `ilb dev` and `ilb brokers`, and
// the base of streams/streamstest.
//
// Start brings both up (either may be left out), pre-creates ilb's default
// topics and allows auto topic creation. With a DataDir, JetStream state
// (the weights bucket and its history) and the Kafka log survive a restart;
// without one, Kafka lives in memory and JetStream uses a temporary
// directory removed on Close.
//
// NATS may also run as a cluster (Config.NATSCluster): several nodes in
// this process, routed to each other on loopback and to nodes elsewhere
// (Config.NATSRoutes), each with its own JetStream store, so streams and
// buckets can be replicated (R3) and survive the loss of a node.
// StartNATSNode starts one node as configured, for tests that stop, kill
// or restart nodes one at a time (streams/streamstest).
//
// The embedded Kafka broker is one node: replication, rack awareness and
// broker failover do not exist here. Use a real Kafka cluster for that.
//
// # Concurrency
//
// Start and Close may be called from any goroutine; Close is idempotent and
// safe to call concurrently with KafkaAddrs and NATSURL, which only read
// values fixed at Start. The brokers run their own goroutines, all of which
// end before Close returns unless Close reports a shutdown timeout.
package embedded
