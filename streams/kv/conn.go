package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config says how to reach NATS.
type Config struct {
	// URL is one or more comma-separated nats:// (or tls://) URLs.
	URL string
	// Name identifies this connection in the server's monitoring.
	Name string
	// CredsFile is a NATS credentials file (JWT and NKey seed).
	CredsFile string
	// NKeyFile is an NKey seed file; exclusive with CredsFile.
	NKeyFile string
	// Password authenticates User with a password given apart from the
	// URL (read from a file or the environment by main, so that it is not
	// on a command line). User may be left empty when the URL names one
	// (nats://USER@host:4222). A password in the URL itself still works;
	// giving both is an error. Exclusive with CredsFile and NKeyFile.
	User, Password string
	// TLSCAFile is a PEM bundle of CAs to trust; TLSCertFile and
	// TLSKeyFile a client certificate for mutual TLS (both or neither).
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// ConnectTimeout bounds one connection attempt.
	ConnectTimeout time.Duration
	// ReconnectWait is the pause between reconnect attempts to one server.
	ReconnectWait time.Duration
	// PingInterval is how often the client pings its server, and
	// MaxPingsOut how many unanswered pings make it drop the connection and
	// reconnect (to another node when URL names several). A server that
	// hangs, or is cut off with the client, is left after about
	// PingInterval × (MaxPingsOut + 1); nats.go's own default, 2 minutes ×
	// 2, would leave a data plane up to 6 minutes on a dead node.
	PingInterval time.Duration
	MaxPingsOut  int
	// ReconnectBufBytes is how much outgoing data is buffered while
	// reconnecting; publishes beyond it fail at once.
	ReconnectBufBytes int
	// RetryOnFailedConnect makes Connect succeed while NATS is down and
	// keep trying in the background, so a service can start (and serve
	// from its last good state) before NATS is up.
	RetryOnFailedConnect bool
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns a configuration for the local embedded server.
func DefaultConfig() Config {
	return Config{
		URL:               nats.DefaultURL,
		Name:              "ilb",
		ConnectTimeout:    5 * time.Second,
		ReconnectWait:     500 * time.Millisecond,
		PingInterval:      10 * time.Second,
		MaxPingsOut:       2,
		ReconnectBufBytes: 8 << 20,
	}
}

// Validate reports the first problem with c. It does not read files.
func (c Config) Validate() error {
	if len(splitURLs(c.URL)) == 0 {
		return errors.New("kv: no NATS URL")
	}
	for _, u := range splitURLs(c.URL) {
		pu, err := url.Parse(u)
		if err != nil || pu.Host == "" {
			return fmt.Errorf("kv: NATS URL %q is not scheme://host:port", RedactURLs(u))
		}
	}
	if _, _, err := c.serverURLs(); err != nil {
		return err
	}
	switch {
	case c.CredsFile != "" && c.NKeyFile != "":
		return errors.New("kv: set a creds file or an nkey file, not both")
	case c.Password != "" && (c.CredsFile != "" || c.NKeyFile != ""):
		return errors.New("kv: set a password or a creds/nkey file, not both")
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return errors.New("kv: TLS client certificate and key go together")
	case c.ConnectTimeout <= 0 || c.ReconnectWait <= 0:
		return fmt.Errorf("kv: connect timeout %v and reconnect wait %v must be positive", c.ConnectTimeout, c.ReconnectWait)
	case c.PingInterval < 0 || c.MaxPingsOut < 0:
		return fmt.Errorf("kv: ping interval %v and max pings out %d must not be negative", c.PingInterval, c.MaxPingsOut)
	case c.ReconnectBufBytes < 0:
		return fmt.Errorf("kv: reconnect buffer %d bytes is negative", c.ReconnectBufBytes)
	}
	return nil
}

func splitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Options validates c and returns the nats.go options for it. Dial with
// Connect: with a Password it also strips the user from the URLs.
func (c Config) Options() ([]nats.Option, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := append(connLogging(log),
		nats.Name(c.Name),
		nats.Timeout(c.ConnectTimeout),
		nats.MaxReconnects(-1), // never give up: the data plane outlives NATS outages
		nats.ReconnectWait(c.ReconnectWait),
		nats.ReconnectBufSize(c.ReconnectBufBytes),
		nats.RetryOnFailedConnect(c.RetryOnFailedConnect),
	)
	if c.PingInterval > 0 {
		opts = append(opts, nats.PingInterval(c.PingInterval))
	}
	if c.MaxPingsOut > 0 {
		opts = append(opts, nats.MaxPingsOutstanding(c.MaxPingsOut))
	}
	if c.Password != "" {
		_, user, _ := c.serverURLs() // checked by Validate
		opts = append(opts, nats.UserInfo(user, c.Password))
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("kv: nkey file: %w", err)
		}
		opts = append(opts, o)
	}
	if c.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLSCAFile))
	}
	if c.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(c.TLSCertFile, c.TLSKeyFile))
	}
	return opts, nil
}

// Connect connects to NATS and returns the connection and its JetStream
// context. ctx is checked first; the attempt itself is bounded by
// ConnectTimeout. The connection reconnects forever; close it when done.
func Connect(ctx context.Context, cfg Config) (*nats.Conn, jetstream.JetStream, error) {
	opts, err := cfg.Options()
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	urls, _, _ := cfg.serverURLs() // checked by Options
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, nil, withHint(fmt.Errorf("kv: connect to %s: %w", RedactURLs(cfg.URL), err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("kv: jetstream: %w", err)
	}
	return nc, connJetStream{js}, nil
}

// serverURLs returns the URLs to dial and the user to authenticate with
// Password. Without a Password they are c.URL as given (a user and
// password in it are nats.go's to use). With one, the user is c.User or
// the one the URLs name, and the URLs are stripped of it: nats.go would
// take a URL's user without a password for a token and ignore Password.
func (c Config) serverURLs() (urls, user string, err error) {
	if c.Password == "" {
		if c.User != "" {
			return "", "", errors.New("kv: a NATS user needs a password")
		}
		return c.URL, "", nil
	}
	parts := splitURLs(c.URL)
	user = c.User
	for i, raw := range parts {
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", fmt.Errorf("kv: NATS URL %q is not scheme://host:port", RedactURLs(raw))
		}
		if u.User == nil {
			continue
		}
		if _, has := u.User.Password(); has {
			return "", "", fmt.Errorf("kv: NATS URL %s has a password and another one is given apart from it; give one", u.Redacted())
		}
		name := u.User.Username()
		if user != "" && name != user {
			return "", "", fmt.Errorf("kv: NATS users %q and %q are both given; give one", user, name)
		}
		user = name
		u.User = nil
		parts[i] = u.String()
	}
	if user == "" {
		return "", "", errors.New("kv: a NATS password needs a user: put it in the URL (nats://USER@host:4222)")
	}
	return strings.Join(parts, ","), user, nil
}

// RedactURLs returns a comma-separated list of NATS URLs with any password
// replaced by "xxxxx", for logs and error messages.
func RedactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		} else if err != nil && strings.Contains(p, "@") {
			parts[i] = "(unparsable URL with credentials)"
		}
	}
	return strings.Join(parts, ",")
}
