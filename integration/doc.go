// Package integration holds end-to-end tests across real brokers: signals
// in through Kafka, snapshots out through NATS JetStream KV, data planes
// routing, faults injected. It also keeps the deployment honest: the tests
// here parse docker-compose.yml and the files under deploy/ (Dockerfile,
// NATS, Prometheus, OpenTelemetry collector and Grafana configs, example
// fleets) and check that they agree with each other and with the repository,
// since no container engine is needed to run them.
//
// Nothing imports this package; it has no exported API.
//
// # Concurrency
//
// Tests that start brokers own them for the test's lifetime and stop them
// before returning; goroutine leaks are checked with goleak.
package integration
