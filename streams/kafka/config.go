package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms ClientConfig accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// ClientConfig says how to reach a Kafka cluster. It is shared by
// producers, group consumers and topic admin.
type ClientConfig struct {
	// Brokers are bootstrap host:port addresses.
	Brokers []string
	// ClientID names this client in broker logs and quotas.
	ClientID string

	// TLS, when non-nil, is used as is and the TLS file fields must be
	// empty.
	TLS *tls.Config
	// TLSEnable turns on TLS with the system's root CAs when no TLS file is
	// given. Any TLS file turns TLS on by itself.
	TLSEnable bool
	// TLSCAFile is a PEM bundle of CAs to trust instead of the system's.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are a PEM client certificate and key for
	// mutual TLS; both or neither.
	TLSCertFile, TLSKeyFile string
	// TLSServerName overrides the name checked in the broker certificate.
	TLSServerName string

	// SASLMechanism is "", SASLPlain, SASLScramSHA256 or SASLScramSHA512.
	SASLMechanism string
	// SASLUser and SASLPassword are the SASL credentials.
	SASLUser, SASLPassword string

	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration
	// Logger receives franz-go's logs (its info level as debug); nil
	// discards them.
	Logger *slog.Logger
}

// DefaultClientConfig returns a configuration for the local embedded
// broker (`ilb brokers` / `ilb dev`).
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		Brokers:     []string{"127.0.0.1:9092"},
		ClientID:    "ilb",
		DialTimeout: 10 * time.Second,
	}
}

// Validate reports the first problem with c. It does not read files.
func (c ClientConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: no brokers")
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("kafka: broker %q: %w", b, err)
		}
	}
	if c.DialTimeout <= 0 {
		return fmt.Errorf("kafka: dial timeout %v must be positive", c.DialTimeout)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	return c.validateSASL()
}

func (c ClientConfig) validateTLS() error {
	files := c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != ""
	switch {
	case c.TLS != nil && (files || c.TLSServerName != ""):
		return errors.New("kafka: set either a tls.Config or TLS files, not both")
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return errors.New("kafka: TLS client certificate and key go together")
	}
	return nil
}

func (c ClientConfig) validateSASL() error {
	switch c.SASLMechanism {
	case "":
		if c.SASLUser != "" || c.SASLPassword != "" {
			return errors.New("kafka: SASL user or password given without a mechanism")
		}
		return nil
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASLUser == "" {
			return fmt.Errorf("kafka: SASL %s needs a user", c.SASLMechanism)
		}
		return nil
	}
	return fmt.Errorf("kafka: unknown SASL mechanism %q (want %s, %s or %s)",
		c.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
}

// Opts validates c, loads its TLS files and returns the franz-go options
// for it.
func (c ClientConfig) Opts() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.DialTimeout(c.DialTimeout),
	}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.Logger != nil {
		opts = append(opts, kgo.WithLogger(kgoLogger{c.Logger}))
	}
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := c.saslOpt(); m != nil {
		opts = append(opts, m)
	}
	return opts, nil
}

// tlsConfig returns the TLS configuration, nil for plaintext.
func (c ClientConfig) tlsConfig() (*tls.Config, error) {
	if c.TLS != nil {
		return c.TLS.Clone(), nil
	}
	if !c.TLSEnable && c.TLSCAFile == "" && c.TLSCertFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: TLS CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka: TLS CA file %s holds no PEM certificate", c.TLSCAFile)
		}
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: TLS client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func (c ClientConfig) saslOpt() kgo.Opt {
	switch c.SASLMechanism {
	case SASLPlain:
		return kgo.SASL(plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism())
	case SASLScramSHA256:
		return kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism())
	case SASLScramSHA512:
		return kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism())
	}
	return nil
}

// kgoLogger sends franz-go's logs to slog. franz-go's info level
// (connections, group joins) becomes slog debug to keep services quiet.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case l.log.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelInfo
	case l.log.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	case l.log.Enabled(ctx, slog.LevelError):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	}
	l.log.Log(context.Background(), lv, msg, keyvals...)
}
