package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ilb-router/ilb/streams/kv"
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

// natsConfigFrom parses args as a service's NATS flags and maps them.
func natsConfigFrom(t *testing.T, args ...string) (kv.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := addNATSFlags(fs)
	if fs.Lookup("nats-password") != nil {
		t.Fatal("a NATS password flag would expose the secret in ps")
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return n.config("dp")
}

func TestNATSPasswordFromFileOrEnv(t *testing.T) {
	const fromFile, fromEnv = "nats-file-pw-Lm2", "nats-env-pw-Rk8"
	pw := filepath.Join(t.TempDir(), "nats-pw")
	if err := os.WriteFile(pw, []byte(fromFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envNATSPassword, fromEnv)
	c, err := natsConfigFrom(t, "--nats", "nats://dataplane@h:4222", "--nats-password-file", pw)
	if err != nil || c.Password != fromFile || c.URL != "nats://dataplane@h:4222" {
		t.Fatalf("file: config %+v, err %v; want the file's password (it wins over %s)", c, err, envNATSPassword)
	}
	c, err = natsConfigFrom(t, "--nats", "nats://dataplane@h:4222")
	if err != nil || c.Password != fromEnv {
		t.Fatalf("env: config %+v, err %v", c, err)
	}

	t.Setenv(envNATSPassword, "")
	c, err = natsConfigFrom(t, "--nats", "nats://dataplane:in-url-pw@h:4222")
	if err != nil || c.Password != "" || c.URL != "nats://dataplane:in-url-pw@h:4222" {
		t.Fatalf("password in the URL: config %+v, err %v; want it left to the URL", c, err)
	}
}

func TestNATSPasswordRejectsBadInput(t *testing.T) {
	const secretPW = "nats-bad-input-pw-Yt6"
	dir := t.TempDir()
	pw, empty := filepath.Join(dir, "pw"), filepath.Join(dir, "empty")
	for path, body := range map[string]string{pw: secretPW, empty: "\n"} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"missing file", "", []string{"--nats", "nats://u@h:4222", "--nats-password-file", filepath.Join(dir, "nope")}, "--nats-password-file"},
		{"empty file", "", []string{"--nats", "nats://u@h:4222", "--nats-password-file", empty}, "is empty"},
		{"no user", "", []string{"--nats", "nats://h:4222", "--nats-password-file", pw}, "needs a user"},
		{"password twice", secretPW, []string{"--nats", "nats://u:other-pw@h:4222"}, "give one"},
		{"password and creds", "", []string{"--nats", "nats://u@h:4222", "--nats-password-file", pw, "--nats-creds", "a.creds"}, "not both"},
		{"not a URL", "", []string{"--nats", "localhost"}, "scheme://host:port"},
		{"no host, password in the URL", "", []string{"--nats", "nats://u:" + secretPW + "@"}, "scheme://host:port"},
	} {
		t.Setenv(envNATSPassword, tc.env)
		_, err := natsConfigFrom(t, tc.args...)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a usage error (exit 2) containing %q", tc.name, err, tc.want)
			continue
		}
		for _, s := range []string{secretPW, "other-pw"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q contains a password", tc.name, err)
			}
		}
	}
}
