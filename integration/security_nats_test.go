package integration

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// nkeyUser is an NKey identity: its seed (what the file --nats-nkey
// reads holds) and public key (what the server knows).
type nkeyUser struct {
	seed, public string
	seedFile     string // written by withSeedFile
}

// Throwaway NKey users for these tests only, made with nkeys.CreateUser
// (kept as constants so that the tests need not import nkeys, which
// go.mod lists as indirect). They unlock nothing outside this test's own
// servers.
var (
	nkeyOptimizer = nkeyUser{seed: "SUAHQCOC65S3Y26IZC7D25QC42MBYUQIMOIZJ64Q6KGPNYCQ2PPRTZG6BU",
		public: "UDKKV7NJ4WEEYBBFGXZYUURBQ2OZK5A3XIHDU5YDBUBVGPCQKBDKIDAF"}
	nkeyDataplane = nkeyUser{seed: "SUALJRZVJZCYVIXYHZFWYMAKNRL55WDXIHPLXZOPK4QYDFYRJWU2HNFOF4",
		public: "UA3BTCE3XO3RGWLXVTK5H6LRBYVEBYTZ4JTZO6SS7F74NFQYWKD62OVD"}
	nkeyStranger = nkeyUser{seed: "SUAB3HMRROHIVLZKL373TK47UAJWNCJ7BRXEBF5B64QMHORZ5FDX62K2TE",
		public: "UC44RRPUIURXRUZ65DGNNX2DZNCJ4AMCEOIYLVSUQTXBBQL3ZAEDK62I"}
)

// withSeedFile writes u's seed to a file only its owner can read.
func (u nkeyUser) withSeedFile(t testing.TB, dir, name string) nkeyUser {
	t.Helper()
	u.seedFile = writeSecret(t, dir, name+".nk", u.seed)
	return u
}

// secureNATS starts a nats-server with JetStream that accepts only TLS
// connections with a client certificate from the test CA, and only the
// given NKey users, each with the account and permissions of the user of
// that name in deploy/nats/nats.conf. It returns the tls:// URL.
func secureNATS(t *testing.T, p *pki, users map[string]nkeyUser) string {
	t.Helper()
	opts := loadNATSConfig(t)
	for _, u := range opts.Users {
		nk, ok := users[u.Username]
		if !ok {
			continue
		}
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: nk.public, Permissions: u.Permissions, Account: u.Account})
	}
	if len(opts.Nkeys) != len(users) {
		t.Fatalf("nats.conf has users for %d of the %d NKey identities", len(opts.Nkeys), len(users))
	}
	opts.Users = nil
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.StoreDir, opts.NoLog, opts.NoSigs = t.TempDir(), true, true
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: p.serverCert, KeyFile: p.serverKey, CaFile: p.caFile, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = tc, true, true, 2
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return fmt.Sprintf("tls://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
}

// secureNATSConfig is what --nats URL --nats-nkey FILE --nats-tls-ca,
// --nats-tls-cert and --nats-tls-key give a service.
func secureNATSConfig(url string, p *pki, user nkeyUser, name string) kv.Config {
	c := natsConfig(url, name)
	c.NKeyFile, c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = user.seedFile, p.caFile, p.clientCert, p.clientKey
	return c
}

// TestSecurityNATSTLSAndNKeys proves the services' NATS client config
// (what --nats-nkey and --nats-tls-* map to) connects to a NATS server
// that requires TLS with a client certificate and NKey authentication
// when, and only when, everything is right: an unknown NKey, no client
// certificate, the wrong CA, or plaintext is refused.
func TestSecurityNATSTLSAndNKeys(t *testing.T) {
	checkLeaks(t)
	p := newPKI(t)
	opt := nkeyOptimizer.withSeedFile(t, p.dir, "optimizer")
	stranger := nkeyStranger.withSeedFile(t, p.dir, "stranger")
	url := secureNATS(t, p, map[string]nkeyUser{"optimizer": opt})
	ok := secureNATSConfig(url, p, opt, "test")
	ok.RetryOnFailedConnect = false
	checkAccess(t, ok, []accessCase[kv.Config]{
		{"tls-client-cert-nkey", func(*kv.Config) {}, true},
		{"unknown-nkey", func(c *kv.Config) { c.NKeyFile = stranger.seedFile }, false},
		{"no-nkey", func(c *kv.Config) { c.NKeyFile = "" }, false},
		{"no-client-cert", func(c *kv.Config) { c.TLSCertFile, c.TLSKeyFile = "", "" }, false},
		{"wrong-ca", func(c *kv.Config) { c.TLSCAFile = p.otherCAFile }, false},
		{"plaintext", func(c *kv.Config) {
			c.URL = "nats" + c.URL[len("tls"):]
			c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = "", "", ""
		}, false},
	}, func(cfg kv.Config) error {
		nc, _, err := kv.Connect(t.Context(), cfg)
		if err == nil {
			nc.Close()
		}
		return err
	})
}

// TestSecurityNATSServicesWithPermissions runs the real optimizer and data
// plane against a TLS-only NATS server with NKey users that have the
// permissions of deploy/nats/nats.conf: the optimizer creates the bucket
// and publishes, the data plane (read-only user) watches and serves the
// snapshots, and a put with the data plane's identity is refused, with
// kv.ErrNotPermitted naming the refused subject rather than a bare
// timeout, leaving the served weights unchanged. No seed appears in the
// logs.
func TestSecurityNATSServicesWithPermissions(t *testing.T) {
	checkLeaks(t)
	p := newPKI(t)
	optUser, dpUser := nkeyOptimizer.withSeedFile(t, p.dir, "optimizer"), nkeyDataplane.withSeedFile(t, p.dir, "dataplane")
	url := secureNATS(t, p, map[string]nkeyUser{"optimizer": optUser, "dataplane": dpUser})
	brokers := streamstest.Kafka(t, allTopics...)
	sink, log := newLogSink(t, slog.LevelDebug)
	fleet := parseFleet(t, smallFleet)

	ocfg := secureNATSConfig(url, p, optUser, "optimizer")
	ocfg.Logger = log
	onc, ojs := connectNATSKV(t, ocfg)
	okc := kafkaConfig(brokers, "optimizer")
	runOptimizer(t, fastOptimizer(fleet, "opt"), optimizer.Deps{JetStream: ojs, NATS: onc, Kafka: &okc, Logger: log})

	dcfg := secureNATSConfig(url, p, dpUser, "dataplane")
	dp := startDataplane(t, fastDataplane(time.Hour, "fe-a"), dataplaneDeps{nats: &dcfg, log: log, name: "dataplane"})
	_, djs := connectNATSKV(t, dcfg) // another connection with the data plane's identity
	c := httpClient(t, 5*time.Second)
	waitUntil(t, 15*time.Second, "version 2 at the read-only data plane", func() bool {
		return routing(t, c, dp.url, "fe-a").Version >= 2
	})

	b := weightsBucket(t, djs)
	forged := fmt.Appendf(nil, `{"version":999999,"cluster":"fe-a","created_at":%q,"weights":{"e-0":1},"shed_fraction":0}`,
		time.Now().UTC().Format(time.RFC3339))
	cur, err := kv.Get(shortCtx(t, 3*time.Second), b, "fe-a")
	if err != nil {
		t.Fatalf("the data plane's identity cannot read the bucket: %v", err)
	}
	_, err = kv.Put(shortCtx(t, time.Second), b, "fe-a", forged, cur.Revision)
	if err == nil {
		t.Fatal("the data plane's identity wrote a snapshot into the weights bucket")
	}
	if !errors.Is(err, kv.ErrNotPermitted) || !strings.Contains(err.Error(), "$KV.ilb-weights.fe-a") {
		t.Errorf("the refused put says %v; want kv.ErrNotPermitted naming the subject", err)
	}
	time.Sleep(300 * time.Millisecond)
	if v := routing(t, c, dp.url, "fe-a"); v.Version >= 999999 {
		t.Errorf("the forged snapshot is served: %+v", v)
	}
	checkNoSecrets(t, "service logs", sink.String(), optUser.seed, dpUser.seed)
	t.Logf("over TLS + NKeys with nats.conf permissions: the data plane serves the optimizer's snapshots; its own put was refused (%v)", err)
}
