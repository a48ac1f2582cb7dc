package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
)

// Environment variables that carry broker secrets, so they never appear
// on a command line (visible in ps) or in logs.
const (
	envKafkaSASLPassword = "ILB_KAFKA_SASL_PASSWORD"
	envNATSPassword      = "ILB_NATS_PASSWORD"
)

// kafkaFlags are the Kafka connection flags every service shares.
type kafkaFlags struct {
	brokers                   string
	tls                       bool
	caFile, certFile, keyFile string
	serverName                string
	saslMechanism, saslUser   string
	saslPasswordFile          string
}

// addKafkaFlags registers --kafka and its TLS/SASL options on fs.
func addKafkaFlags(fs *flag.FlagSet) *kafkaFlags {
	k := &kafkaFlags{}
	fs.StringVar(&k.brokers, "kafka", "127.0.0.1:9092", "Kafka bootstrap brokers, host:port[,host:port...]")
	fs.BoolVar(&k.tls, "kafka-tls", false, "connect to Kafka over TLS (system roots unless --kafka-tls-ca)")
	fs.StringVar(&k.caFile, "kafka-tls-ca", "", "PEM CA bundle to trust for Kafka (turns TLS on)")
	fs.StringVar(&k.certFile, "kafka-tls-cert", "", "PEM client certificate for Kafka mutual TLS")
	fs.StringVar(&k.keyFile, "kafka-tls-key", "", "PEM client key for Kafka mutual TLS")
	fs.StringVar(&k.serverName, "kafka-tls-server-name", "", "name to check in the Kafka broker certificate")
	fs.StringVar(&k.saslMechanism, "kafka-sasl", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&k.saslUser, "kafka-sasl-user", "", "SASL user name")
	fs.StringVar(&k.saslPasswordFile, "kafka-sasl-password-file", "",
		"file holding the SASL password (or set "+envKafkaSASLPassword+"); never passed as a flag")
	return k
}

// config maps the flags to a validated client config.
func (k *kafkaFlags) config(clientID string) (kafka.ClientConfig, error) {
	c := kafka.DefaultClientConfig()
	c.ClientID = clientID
	c.Brokers = brokerList(k.brokers)
	c.TLSEnable = k.tls
	c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = k.caFile, k.certFile, k.keyFile
	c.TLSServerName = k.serverName
	c.SASLMechanism = strings.ToUpper(k.saslMechanism)
	c.SASLUser = k.saslUser
	if c.SASLMechanism != "" {
		pw, err := secret(k.saslPasswordFile, envKafkaSASLPassword)
		if err != nil {
			return c, badInput("--kafka-sasl-password-file: %v", err)
		}
		c.SASLPassword = pw
	}
	if err := c.Validate(); err != nil {
		return c, badInput("%v (check --kafka and its TLS/SASL flags)", err)
	}
	return c, nil
}

// natsFlags are the NATS connection flags every service shares.
type natsFlags struct {
	url                       string
	creds, nkey               string
	passwordFile              string
	caFile, certFile, keyFile string
}

// addNATSFlags registers --nats and its credential/TLS options on fs.
func addNATSFlags(fs *flag.FlagSet) *natsFlags {
	n := &natsFlags{}
	fs.StringVar(&n.url, "nats", "nats://127.0.0.1:4222", "NATS server URL(s), comma-separated; user:password@ allowed in the URL")
	fs.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (JWT + NKey seed)")
	fs.StringVar(&n.nkey, "nats-nkey", "", "NATS NKey seed file")
	fs.StringVar(&n.passwordFile, "nats-password-file", "",
		"file holding the password of the user named in --nats (nats://USER@host:4222), or set "+envNATSPassword+"; never passed as a flag")
	fs.StringVar(&n.caFile, "nats-tls-ca", "", "PEM CA bundle to trust for NATS")
	fs.StringVar(&n.certFile, "nats-tls-cert", "", "PEM client certificate for NATS mutual TLS")
	fs.StringVar(&n.keyFile, "nats-tls-key", "", "PEM client key for NATS mutual TLS")
	return n
}

// config maps the flags to a NATS connection config.
func (n *natsFlags) config(name string) (kv.Config, error) {
	c := kv.DefaultConfig()
	c.URL = n.url
	c.Name = name
	c.CredsFile, c.NKeyFile = n.creds, n.nkey
	c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = n.caFile, n.certFile, n.keyFile
	if n.url == "" {
		return c, badInput("--nats is empty")
	}
	if n.creds != "" && n.nkey != "" {
		return c, badInput("--nats-creds and --nats-nkey are exclusive; give one")
	}
	pw, err := secret(n.passwordFile, envNATSPassword)
	switch {
	case err != nil:
		return c, badInput("--nats-password-file: %v", err)
	case pw == "" && n.passwordFile != "":
		return c, badInput("--nats-password-file %s is empty", n.passwordFile)
	}
	c.Password = pw
	if err := c.Validate(); err != nil {
		return c, badInput("%v (check --nats, --nats-password-file or %s, and the credential flags)", err, envNATSPassword)
	}
	return c, nil
}

// secret reads a secret from a file or, when path is empty, from env.
func secret(path, env string) (string, error) {
	if path == "" {
		return os.Getenv(env), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// brokerList splits a comma-separated flag value, dropping empty items.
func brokerList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
