package integration

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// securityNoSecrets (run by TestBinary) runs the ilb binary's services the
// way an operator does, with secrets passed the supported ways: the Kafka
// SASL password in a file (--kafka-sasl-password-file) or in
// ILB_KAFKA_SASL_PASSWORD, never as a flag, and the NATS password in the
// --nats URL (what docker-compose.yml does), in a file
// (--nats-password-file) or in ILB_NATS_PASSWORD, with the user in the
// URL. The brokers are the test's own: a TLS-only, SCRAM-only Kafka and a
// NATS server configured from deploy/nats/nats.conf. Each service runs
// once with the right secret (and must get to work: partitions assigned,
// snapshots published and served) and once with a wrong one; debug
// logging is on where a flag allows it. A wrong NATS password is named as
// the server's "authorization violation" in the output. Nothing any
// process prints, on stdout or stderr, contains a password, right or
// wrong.
func securityNoSecrets(t *testing.T, bin string) {
	p := newPKI(t)
	kafkaAddr := secureKafka(t, p, p.serverTLS)[0]
	srv := startNATSFromConfig(t)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	natsHost := srv.Addr().(*net.TCPAddr).String()
	natsWith := func(user, pass string) string {
		return (&url.URL{Scheme: "nats", User: url.UserPassword(user, pass), Host: natsHost}).String()
	}
	natsUser := func(user string) string {
		return (&url.URL{Scheme: "nats", User: url.User(user), Host: natsHost}).String()
	}
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleet, smallFleet)
	goodFile := writeSecret(t, dir, "kafka-password", kafkaPass256)
	kafkaArgs := []string{"--kafka", kafkaAddr, "--kafka-tls-ca", p.caFile, "--kafka-sasl", "SCRAM-SHA-256", "--kafka-sasl-user", kafkaUser256}
	withFile := append(append([]string{}, kafkaArgs...), "--kafka-sasl-password-file", goodFile)
	wrongEnv := []string{"ILB_KAFKA_SASL_PASSWORD=" + kafkaWrongPass}
	optKey, dpKey := nkeyOptimizer.withSeedFile(t, dir, "optimizer"), nkeyDataplane.withSeedFile(t, dir, "dataplane")
	tlsNATS := secureNATS(t, p, map[string]nkeyUser{"optimizer": optKey, "dataplane": dpKey})
	natsTLS := func(u nkeyUser) []string {
		return []string{"--nats", tlsNATS, "--nats-nkey", u.seedFile, "--nats-tls-ca", p.caFile,
			"--nats-tls-cert", p.clientCert, "--nats-tls-key", p.clientKey}
	}
	const wrongNATS = "wrong-nats-pw-Qz7"
	dpPasswordFile := writeSecret(t, dir, "nats-dataplane-password", testDataplanePassword)
	wrongNATSEnv := append([]string{"ILB_NATS_PASSWORD=" + wrongNATS}, wrongEnv...)

	runs := []struct {
		name  string
		env   []string
		args  []string
		ready string // printed once the service works; "" for the wrong-secret runs
		says  string // printed (case aside) by the end, if set
	}{
		{"aggregator", nil, append([]string{"aggregator", "--fleet", fleet, "--log-level", "debug", "--window", "1s"}, withFile...),
			`partitions assigned`, ""},
		{"aggregator-wrong", wrongEnv, append([]string{"aggregator", "--fleet", fleet, "--log-level", "debug", "--group", "wrong"}, kafkaArgs...), "", ""},
		{"engine-sim", nil, append([]string{"engine-sim", "--fleet", fleet, "--http", "127.0.0.1:0", "--status-interval", "200ms"}, withFile...),
			`listening on`, ""},
		{"optimizer", nil, append([]string{"optimizer", "--fleet", fleet, "--id", "opt", "--nats", natsWith("optimizer", testOptimizerPassword),
			"--min-interval", "200ms", "--max-interval", "500ms"}, withFile...), `leadership changed.*leader=true`, ""},
		{"optimizer-wrong", wrongEnv, append([]string{"optimizer", "--fleet", fleet, "--id", "opt-wrong",
			"--nats", natsWith("optimizer", wrongNATS)}, kafkaArgs...), "", "authorization violation"},
		{"dataplane", nil, append([]string{"dataplane", "--cluster", "fe-a", "--fleet", fleet, "--http", "127.0.0.1:0",
			"--nats", natsUser("dataplane"), "--nats-password-file", dpPasswordFile}, withFile...), `snapshot swapped in`, ""},
		{"optimizer-nkey-tls", nil, append(append([]string{"optimizer", "--fleet", fleet, "--id", "opt-nkey",
			"--min-interval", "200ms", "--max-interval", "500ms"}, natsTLS(optKey)...), withFile...), `leadership changed.*leader=true`, ""},
		{"dataplane-nkey-tls", nil, append(append([]string{"dataplane", "--cluster", "fe-a", "--fleet", fleet, "--http", "127.0.0.1:0"},
			natsTLS(dpKey)...), withFile...), `snapshot swapped in`, ""},
		{"dataplane-wrong", wrongNATSEnv, append([]string{"dataplane", "--cluster", "fe-a", "--fleet", fleet, "--http", "127.0.0.1:0",
			"--nats", natsUser("dataplane")}, kafkaArgs...), "", "authorization violation"},
	}
	procs := make([]*proc, len(runs))
	for i, r := range runs {
		procs[i] = startProcEnv(t, bin, r.name, r.env, r.args...)
	}
	var wg sync.WaitGroup
	for i, r := range runs {
		if r.ready != "" {
			wg.Go(func() { procs[i].waitMatch(t, r.ready) })
		}
	}
	wg.Wait()
	time.Sleep(time.Second) // let the wrong-secret runs retry and log a while longer
	for i, r := range runs {
		procs[i].stop(t)
		out := procs[i].out.String()
		if r.says != "" && !strings.Contains(strings.ToLower(out), r.says) {
			t.Errorf("%s: output does not say %q:\n%s", r.name, r.says, lastLines(out, 10))
		}
		checkNoSecrets(t, r.name+" output", out, kafkaPass256, kafkaWrongPass, testOptimizerPassword, testDataplanePassword, wrongNATS,
			optKey.seed, dpKey.seed)
		t.Logf("%s: %d bytes of output, no secret; last line: %s", r.name, len(out), lastLines(out, 1))
	}
	t.Run("weights-command", func(t *testing.T) {
		// An operator's one-shot command against an unreachable NATS:
		// the error must name the server, not its password.
		const pw = "unreachable-nats-pw-Vb2"
		closed := (&url.URL{Scheme: "nats", User: url.UserPassword("optimizer", pw), Host: "127.0.0.1:1"}).String()
		cmd := startProc(t, bin, "weights", "weights", "history", "--nats", closed)
		<-cmd.done
		checkNoSecrets(t, "ilb weights output", cmd.out.String(), pw)
	})
}
