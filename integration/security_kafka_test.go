package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/enginesim"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// Test-only Kafka credentials: distinctive strings, so a log line that
// leaks one is found by a plain search.
const (
	kafkaUser256, kafkaPass256 = "ilb-svc", "kafka-s3cret-256-Zq8"
	kafkaUser512, kafkaPass512 = "ilb-svc-512", "kafka-s3cret-512-Wx3"
	kafkaWrongPass             = "kafka-wr0ng-pass-Jk5"
)

// secureKafka starts a Kafka-protocol broker that speaks only TLS (with
// the test CA's server certificate) and requires SASL, with one
// SCRAM-SHA-256 and one SCRAM-SHA-512 user. It returns its address.
func secureKafka(t testing.TB, p *pki, tlsCfg *tls.Config) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(tlsCfg), kfake.EnableSASL(),
		kfake.Superuser(kafka.SASLScramSHA256, kafkaUser256, kafkaPass256),
		kfake.Superuser(kafka.SASLScramSHA512, kafkaUser512, kafkaPass512),
		kfake.SeedTopics(streamstest.Partitions, allTopics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// secureKafkaConfig is the client config a service gets from
// --kafka-tls-ca and --kafka-sasl SCRAM-SHA-256 with its password file.
func secureKafkaConfig(brokers []string, p *pki, id string) kafka.ClientConfig {
	c := kafkaConfig(brokers, id)
	c.TLSCAFile = p.caFile
	c.SASLMechanism, c.SASLUser, c.SASLPassword = kafka.SASLScramSHA256, kafkaUser256, kafkaPass256
	return c
}

// kafkaReachable reports whether a client with cfg can list the broker's
// topics within 3 s.
func kafkaReachable(cfg kafka.ClientConfig) error {
	opts, err := cfg.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err == nil && !topics.Has(schemas.TopicSignals) {
		err = fmt.Errorf("connected but %s is not listed", schemas.TopicSignals)
	}
	return err
}

// TestSecurityKafkaTLSAndSCRAM proves the services' Kafka client config
// (the one every --kafka-tls-*/--kafka-sasl* flag maps to) connects to a
// broker that speaks only TLS and requires SASL/SCRAM when, and only
// when, it has the right CA and credentials, with SCRAM-SHA-256 and
// SCRAM-SHA-512 alike and with mutual TLS. Wrong password, unknown user,
// no SASL, no TLS, the wrong CA, or no client certificate where one is
// required: each is refused.
func TestSecurityKafkaTLSAndSCRAM(t *testing.T) {
	checkLeaks(t)
	p := newPKI(t)
	brokers := secureKafka(t, p, p.serverTLS)
	mtls := secureKafka(t, p, p.serverMTLS)
	ok := secureKafkaConfig(brokers, p, "ok")
	checkAccess(t, ok, []accessCase[kafka.ClientConfig]{
		{"scram-sha-256", func(*kafka.ClientConfig) {}, true},
		{"scram-sha-512", func(c *kafka.ClientConfig) {
			c.SASLMechanism, c.SASLUser, c.SASLPassword = kafka.SASLScramSHA512, kafkaUser512, kafkaPass512
		}, true},
		{"mutual-tls", func(c *kafka.ClientConfig) {
			c.Brokers, c.TLSCertFile, c.TLSKeyFile = mtls, p.clientCert, p.clientKey
		}, true},
		{"wrong-password", func(c *kafka.ClientConfig) { c.SASLPassword = kafkaWrongPass }, false},
		{"unknown-user", func(c *kafka.ClientConfig) { c.SASLUser = "nobody" }, false},
		{"wrong-mechanism-for-user", func(c *kafka.ClientConfig) { c.SASLMechanism = kafka.SASLScramSHA512 }, false},
		{"no-sasl", func(c *kafka.ClientConfig) { c.SASLMechanism, c.SASLUser, c.SASLPassword = "", "", "" }, false},
		{"no-tls", func(c *kafka.ClientConfig) { c.TLSCAFile = "" }, false},
		{"wrong-ca", func(c *kafka.ClientConfig) { c.TLSCAFile = p.otherCAFile }, false},
		{"mtls-without-client-cert", func(c *kafka.ClientConfig) { c.Brokers = mtls }, false},
	}, kafkaReachable)
}

// TestSecurityKafkaServicesOverTLS runs every Kafka client ilb has over a
// TLS-only, SCRAM-only broker: the simulated engines' idempotent producer,
// the aggregator's consumer group and producer, the data plane's status
// reader and the optimizer's feature reader. Signals flow to features and
// on to the optimizer, and an engine's bad status reaches the data plane.
// An aggregator with a wrong password runs alongside and gets nowhere.
// Every service logs at debug level; no password, right or wrong, appears
// in any log line.
func TestSecurityKafkaServicesOverTLS(t *testing.T) {
	checkLeaks(t)
	p := newPKI(t)
	brokers := secureKafka(t, p, p.serverTLS)
	natsURL := streamstest.NATS(t)
	sink, log := newLogSink(t, slog.LevelDebug)
	fleet := parseFleet(t, smallFleet)
	kc := func(id string) kafka.ClientConfig {
		c := secureKafkaConfig(brokers, p, id)
		c.Logger = log
		return c
	}

	sc := enginesim.DefaultConfig()
	sc.Fleet, sc.TimeScale, sc.StatusInterval, sc.Logger = fleet, 10, 200*time.Millisecond, log
	sc.HTTPAddr, sc.Kafka = "127.0.0.1:0", kc("enginesim")
	sim, err := enginesim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	runSvc(t, "enginesim", sim.Run)
	<-sim.Ready()
	ac := fastAggregator(fleet, brokers, "agg-tls", time.Second)
	ac.Kafka = kc("aggregator")
	agg, _ := startAggregator(t, ac, nil, log)
	bad := ac
	bad.Group, bad.Kafka.SASLPassword = "agg-wrong-password", kafkaWrongPass
	badAgg, _ := startAggregator(t, bad, nil, log)

	oc := fastOptimizer(fleet, "opt")
	nc, js := connectNATSKV(t, natsConfig(natsURL, "opt"))
	okc := kc("optimizer")
	opt := runOptimizer(t, oc, optimizer.Deps{JetStream: js, NATS: nc, Kafka: &okc, Logger: log}).o
	dc := fastDataplane(time.Hour, "fe-a")
	dc.EngineURLs = engineURLs(sim)
	dkc := kc("dataplane")
	dp := startDataplane(t, dc, dataplaneDeps{kafka: &dkc, log: log, name: "dp"})
	if err := dp.d.SetSnapshot(equalSnapshot(fleet, "fe-a")); err != nil {
		t.Fatal(err)
	}

	names := sim.EngineNames()
	ld := startLoad(t, 20, func(ctx context.Context, c *http.Client, i int) (chatAnswer, error) {
		return chat(ctx, c, sim.BaseURL(names[i%len(names)]), "fe-a", fmt.Sprintf("c-%d", i), 3)
	})
	waitUntil(t, 20*time.Second, "features over TLS to reach the optimizer", func() bool {
		st := opt.State()
		return len(st.Clusters) > 0 && st.Clusters[0].ObservedRPS > 0
	})
	ld.stop()
	if err := sim.InjectFault("e-1", enginesim.Fault{Healthy: new(false)}); err != nil {
		t.Fatal(err)
	}
	c := httpClient(t, 5*time.Second)
	waitUntil(t, 10*time.Second, "an unhealthy status over TLS to reach the data plane", func() bool {
		return !routing(t, c, dp.url, "fe-a").available("e-1")
	})
	if s := sim.Stats().Signals; s.Acked == 0 || s.Failed != 0 {
		t.Errorf("signals over TLS: %+v; want acknowledged and none failed", s)
	}
	if st, _ := badAgg.Health().Status(); st["consumer"] {
		t.Error("the aggregator with a wrong password reports a healthy consumer")
	}
	if st, _ := agg.Health().Status(); !st["consumer"] {
		t.Error("the aggregator with the right password reports an unhealthy consumer")
	}
	checkNoSecrets(t, "service logs", sink.String(), kafkaPass256, kafkaPass512, kafkaWrongPass)
	t.Logf("over TLS + SCRAM-SHA-256: %d signals acked, features consumed by the optimizer, status applied by the data plane; %d bytes of debug logs without a password",
		sim.Stats().Signals.Acked, len(sink.String()))
}

// checkNoSecrets fails the test for each secret found in text.
func checkNoSecrets(t testing.TB, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if i := strings.Index(text, s); i >= 0 {
			lo, hi := max(0, i-120), min(len(text), i+len(s)+40)
			t.Errorf("%s contain the secret %q: ...%s...", where, s, text[lo:hi])
		}
	}
}
