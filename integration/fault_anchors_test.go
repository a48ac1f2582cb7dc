package integration

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/streams/kafka"
)

// TestFaultAnchorsBrokerSettings pins the broker-side settings the fault
// tests rely on and that no fault test can show by itself:
//
//   - the embedded JetStream is past the releases with known data-loss
//     bugs (streams lost after crashes fixed in 2.10.23; the faults of
//     Jepsen's NATS 2.12.1 analysis fixed in 2.12.3), as the compose image
//     is (TestComposeNATSVersion);
//   - ilb's Kafka producer (the engines' signals) waits for acks from all
//     in-sync replicas, keeps idempotent writes on (so a retry after a
//     broker restart cannot duplicate a record: TestFaultKafkaDownAndBack
//     counts them) and bounds its buffer (10,000 records by default).
//
// The aggregator's commit-after-processing is shown by behaviour, not
// settings: TestFaultKafkaDownAndBack and the aggregator's restart tests.
func TestFaultAnchorsBrokerSettings(t *testing.T) {
	v, err := parseVersionTag(server.VERSION)
	if err != nil {
		t.Fatalf("nats-server version %q: %v", server.VERSION, err)
	}
	if !natsVersionOK(v) {
		t.Errorf("embedded nats-server %s has known JetStream data-loss bugs; use 2.12.3 or later (2.10.23 or later on 2.10)", server.VERSION)
	}
	pc := kafka.DefaultProducerConfig()
	p, err := kafka.NewProducer(kafkaConfig([]string{"127.0.0.1:1"}, "anchors"), pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cl := p.Client()
	if acks := cl.OptValue(kgo.RequiredAcks); acks != kgo.AllISRAcks() {
		t.Errorf("producer acks %v, want all in-sync replicas", acks)
	}
	if off := cl.OptValue(kgo.DisableIdempotentWrite); off != false {
		t.Errorf("producer idempotent writes disabled: %v", off)
	}
	if n := cl.OptValue(kgo.MaxBufferedRecords); fmt.Sprint(n) != fmt.Sprint(pc.MaxBufferedRecords) {
		t.Errorf("producer buffer bound %v, want %d records", n, pc.MaxBufferedRecords)
	}
	t.Logf("nats-server %s; producer acks=all, idempotent, buffer %d records", server.VERSION, pc.MaxBufferedRecords)
}
