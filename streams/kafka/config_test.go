package kafka_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/streams/kafka"
)

func TestClientConfigValidate(t *testing.T) {
	if err := kafka.DefaultClientConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*kafka.ClientConfig){
		"no brokers":        func(c *kafka.ClientConfig) { c.Brokers = nil },
		"broker no port":    func(c *kafka.ClientConfig) { c.Brokers = []string{"localhost"} },
		"no dial timeout":   func(c *kafka.ClientConfig) { c.DialTimeout = 0 },
		"config and files":  func(c *kafka.ClientConfig) { c.TLS = &tls.Config{}; c.TLSCAFile = "ca.pem" },
		"cert without key":  func(c *kafka.ClientConfig) { c.TLSCertFile = "c.pem" },
		"unknown mechanism": func(c *kafka.ClientConfig) { c.SASLMechanism = "GSSAPI"; c.SASLUser = "u" },
		"mechanism no user": func(c *kafka.ClientConfig) { c.SASLMechanism = kafka.SASLPlain },
		"user no mechanism": func(c *kafka.ClientConfig) { c.SASLUser = "u" },
	}
	for name, mut := range cases {
		c := kafka.DefaultClientConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
		if _, err := c.Opts(); err == nil {
			t.Errorf("%s: Opts accepted it", name)
		}
	}
}

func TestOptsReportsBadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for name, c := range map[string]kafka.ClientConfig{
		"missing CA":   {TLSCAFile: filepath.Join(dir, "nope.pem")},
		"CA not PEM":   {TLSCAFile: notPEM},
		"bad key pair": {TLSCertFile: notPEM, TLSKeyFile: notPEM},
	} {
		c.Brokers, c.DialTimeout = []string{"127.0.0.1:1"}, time.Second
		if _, err := c.Opts(); err == nil {
			t.Errorf("%s: Opts succeeded", name)
		}
	}
}

// startKfake runs a one-node kfake cluster with extra options on a real
// port of 127.0.0.1.
func startKfake(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "t")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func ping(t *testing.T, cc kafka.ClientConfig) error {
	t.Helper()
	opts, err := cc.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxTimeout(t, 3*time.Second)
	return cl.Ping(ctx)
}

func TestSASLAgainstBroker(t *testing.T) {
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			addrs := startKfake(t, kfake.EnableSASL(), kfake.Superuser(mech, "ilb", "s3cret"))
			cc := clientConfig(addrs)
			cc.SASLMechanism, cc.SASLUser, cc.SASLPassword = mech, "ilb", "s3cret"
			if err := ping(t, cc); err != nil {
				t.Fatalf("right password: %v", err)
			}
			cc.SASLPassword = "wrong"
			if err := ping(t, cc); err == nil {
				t.Fatal("wrong password accepted")
			}
		})
	}
}

func TestTLSAgainstBroker(t *testing.T) {
	dir := t.TempDir()
	serverCert, caFile := selfSigned(t, dir)
	addrs := startKfake(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}))

	cc := clientConfig(addrs)
	cc.TLSCAFile = caFile
	if err := ping(t, cc); err != nil {
		t.Fatalf("TLS with the right CA: %v", err)
	}
	cc = clientConfig(addrs)
	cc.TLSEnable = true // system roots do not trust our self-signed cert
	if err := ping(t, cc); err == nil {
		t.Fatal("TLS with system roots accepted a self-signed broker")
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and returns it
// with the path of its PEM (which is its own CA).
func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ilb test broker"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, caFile
}
