package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKafkaFlagsMapToConfig(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	k := addKafkaFlags(fs)
	if err := fs.Parse([]string{"--kafka", "a:9092, b:9093", "--kafka-sasl", "scram-sha-512",
		"--kafka-sasl-user", "ilb", "--kafka-sasl-password-file", pw}); err != nil {
		t.Fatal(err)
	}
	c, err := k.config("test")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Brokers, ",") != "a:9092,b:9093" || c.SASLMechanism != "SCRAM-SHA-512" ||
		c.SASLUser != "ilb" || c.SASLPassword != "s3cret" || c.ClientID != "test" {
		t.Fatalf("config = %+v", c)
	}
}

func TestKafkaFlagsRejectBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--kafka", "no-port"},
		{"--kafka", ""},
		{"--kafka-sasl", "GSSAPI", "--kafka-sasl-user", "u"},
		{"--kafka-sasl", "PLAIN", "--kafka-sasl-password-file", "/does/not/exist"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		k := addKafkaFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if _, err := k.config("t"); err == nil {
			t.Errorf("%v: accepted", args)
		} else if _, ok := err.(usageError); !ok {
			t.Errorf("%v: %v is not a usage error (exit 2)", args, err)
		}
	}
}

func TestSASLPasswordFromEnvNotFlag(t *testing.T) {
	t.Setenv(envKafkaSASLPassword, "from-env")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	k := addKafkaFlags(fs)
	if fs.Lookup("kafka-sasl-password") != nil {
		t.Fatal("a password flag would expose the secret in ps")
	}
	_ = fs.Parse([]string{"--kafka-sasl", "PLAIN", "--kafka-sasl-user", "u"})
	c, err := k.config("t")
	if err != nil || c.SASLPassword != "from-env" {
		t.Fatalf("config %+v, err %v", c, err)
	}
}

func TestNATSFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := addNATSFlags(fs)
	_ = fs.Parse([]string{"--nats", "nats://h:4222", "--nats-creds", "a.creds"})
	c, err := n.config("dp")
	if err != nil || c.URL != "nats://h:4222" || c.CredsFile != "a.creds" || c.Name != "dp" {
		t.Fatalf("config %+v, err %v", c, err)
	}
	_ = fs.Parse([]string{"--nats-nkey", "seed.nk"})
	if _, err := n.config("dp"); err == nil {
		t.Fatal("creds and nkey together accepted")
	}
}
