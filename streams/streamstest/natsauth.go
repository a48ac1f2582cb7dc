package streamstest

import (
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// User is a NATS user that authenticates with a password.
type User struct {
	Name, Password string
}

// NATSWithUsers starts a NATS server with JetStream that admits only the
// given users, each by its password, for the rest of the test, and returns
// its address host:port, so that a test can put a user in the URL
// ("nats://optimizer@" + addr). Tests of credentials use it; NATS and
// NewNATSServer admit anyone.
func NATSWithUsers(t testing.TB, users ...User) string {
	t.Helper()
	if len(users) == 0 {
		t.Fatal("streamstest: NATSWithUsers without users (use NATS for a server that admits anyone)")
	}
	opts := &natsserver.Options{}
	for _, u := range users {
		opts.Users = append(opts.Users, &natsserver.User{Username: u.Name, Password: u.Password})
	}
	return NATSWithOptions(t, opts).Addr().String()
}

// NATSWithOptions starts a NATS server configured by opts for the rest of
// the test: for what the embedded broker does not set up, such as
// accounts, operator (JWT) trust, NKey users or TLS. Whatever opts says,
// the server listens on a free port of 127.0.0.1 (opts.Host and Port are
// overwritten), has JetStream on, stores in a temporary directory unless
// opts.StoreDir is set, has its monitoring port off, and neither logs nor
// handles signals. opts is changed accordingly and must not be reused.
// The test fails when the server does not start with JetStream.
func NATSWithOptions(t testing.TB, opts *natsserver.Options) *natsserver.Server {
	t.Helper()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", natsserver.RANDOM_PORT, 0
	opts.JetStream, opts.NoLog, opts.NoSigs = true, true, true
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	srv, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatalf("streamstest: nats-server: %v", err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("streamstest: nats-server not ready within 10s")
	}
	if !srv.JetStreamEnabled() {
		t.Fatal("streamstest: nats-server started without JetStream")
	}
	return srv
}
