package integration

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
)

// deploy/nats/nats.conf is read by the real nats-server code, and then a
// real server started from it checks the user permissions: the optimizer
// can write the weights bucket, a data plane can read and watch it but
// cannot write, and a wrong password is refused.

const natsConfPath = "deploy/nats/nats.conf"

// Test passwords; compose passes the real ones through these variables.
const (
	testOptimizerPassword = "test-optimizer-pw"
	testDataplanePassword = "test-dataplane-pw"
)

func loadNATSConfig(t *testing.T) *server.Options {
	t.Helper()
	t.Setenv("NATS_OPTIMIZER_PASSWORD", testOptimizerPassword)
	t.Setenv("NATS_DATAPLANE_PASSWORD", testDataplanePassword)
	opts, err := server.ProcessConfigFile(repoPath(natsConfPath))
	if err != nil {
		t.Fatalf("%s: %v", natsConfPath, err)
	}
	return opts
}

func TestNATSConfig(t *testing.T) {
	opts := loadNATSConfig(t)
	if !opts.JetStream || opts.StoreDir != "/data" {
		t.Errorf("jetstream %v store_dir %q, want enabled with /data (the compose volume)", opts.JetStream, opts.StoreDir)
	}
	if !opts.SyncAlways {
		t.Error("jetstream sync_interval is not `always`: acknowledged weight snapshots could be lost on a crash")
	}
	users := map[string]string{}
	for _, u := range opts.Users {
		users[u.Username] = u.Password
	}
	if users["optimizer"] != testOptimizerPassword || users["dataplane"] != testDataplanePassword {
		t.Errorf("users %v: want optimizer and dataplane with passwords from the environment", sortedKeys(users))
	}
	c := loadCompose(t)
	nats := c.service(t, "nats")
	file, _ := flagValue(commandOf(nats), "--config")
	if src, ok := hostPathOf(nats, file); !ok || src != natsConfPath {
		t.Errorf("nats --config %s is mounted from %q, want %s", file, src, natsConfPath)
	}
	if src, ok := hostPathOf(nats, opts.StoreDir); ok {
		t.Errorf("JetStream store %s is a bind mount of %s; want a named volume", opts.StoreDir, src)
	}
	checkNATSHealthPort(t, nats, opts.HTTPPort)
	for _, p := range asList(nats["ports"]) {
		b, _ := parsePort(p)
		if b.containerPort != strconv.Itoa(opts.Port) && b.containerPort != strconv.Itoa(opts.HTTPPort) {
			t.Errorf("nats publishes container port %s; the server listens on %d and %d", b.containerPort, opts.Port, opts.HTTPPort)
		}
	}
}

func checkNATSHealthPort(t *testing.T, nats map[string]any, httpPort int) {
	for _, a := range asStrings(asMap(nats["healthcheck"])["test"]) {
		if u, err := url.Parse(a); err == nil && u.Scheme == "http" {
			if u.Port() != strconv.Itoa(httpPort) {
				t.Errorf("nats health check asks port %s; monitoring listens on %d", u.Port(), httpPort)
			}
			return
		}
	}
	t.Errorf("nats health check %v has no http URL", nats["healthcheck"])
}

func TestNATSPermissions(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startNATSFromConfig(t)
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	optimizer, _ := connectNATS(t, srv, "optimizer", testOptimizerPassword)
	defer optimizer.Close()
	okv, err := mustJetStream(t, optimizer).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: schemas.BucketWeights, History: 16})
	if err != nil {
		t.Fatalf("optimizer creates the bucket: %v", err)
	}
	if _, err := okv.Put(ctx, "fe-east", []byte(`{"version":1}`)); err != nil {
		t.Fatalf("optimizer puts: %v", err)
	}

	dataplane, asyncErrs := connectNATS(t, srv, "dataplane", testDataplanePassword)
	defer dataplane.Close()
	dkv, err := mustJetStream(t, dataplane).KeyValue(ctx, schemas.BucketWeights)
	if err != nil {
		t.Fatalf("dataplane opens the bucket: %v", err)
	}
	e, err := dkv.Get(ctx, "fe-east")
	if err != nil || string(e.Value()) != `{"version":1}` {
		t.Fatalf("dataplane gets fe-east: %v", err)
	}
	if old, err := dkv.GetRevision(ctx, "fe-east", e.Revision()); err != nil || old.Revision() != e.Revision() {
		t.Fatalf("dataplane gets fe-east by revision: %v", err)
	}
	checkDataplaneWatch(ctx, t, dkv, okv)
	checkDataplaneCannotWrite(t, dataplane, asyncErrs, okv)
	checkDataplanesSharePending(t, srv, dataplane, asyncErrs)

	if _, err := nats.Connect(srv.ClientURL(), nats.UserInfo("dataplane", "wrong")); err == nil {
		t.Error("a wrong password was accepted")
	}
}

// checkDataplaneWatch watches as the data plane does: the current value,
// the end-of-initial-values marker, then an update the optimizer puts.
func checkDataplaneWatch(ctx context.Context, t *testing.T, dkv, okv jetstream.KeyValue) {
	w, err := dkv.WatchAll(ctx)
	if err != nil {
		t.Fatalf("dataplane watches: %v", err)
	}
	defer w.Stop()
	next := func() jetstream.KeyValueEntry {
		select {
		case e := <-w.Updates():
			return e
		case <-ctx.Done():
			t.Fatal("dataplane watch: timed out")
			return nil
		}
	}
	if e := next(); e == nil || e.Key() != "fe-east" {
		t.Fatalf("first watch entry %v, want fe-east", e)
	}
	if e := next(); e != nil {
		t.Fatalf("watch entry %q, want the initial-values-done marker", e.Key())
	}
	if _, err := okv.Put(ctx, "fe-east", []byte(`{"version":2}`)); err != nil {
		t.Fatalf("optimizer puts v2: %v", err)
	}
	if e := next(); e == nil || string(e.Value()) != `{"version":2}` {
		t.Fatalf("dataplane watch missed the update: %v", e)
	}
}

// checkDataplaneCannotWrite publishes straight to the bucket's subject and
// to the stream delete API as the data plane: the server must refuse both
// with a permissions violation and the stored value must not change.
func checkDataplaneCannotWrite(t *testing.T, dp *nats.Conn, asyncErrs <-chan error, okv jetstream.KeyValue) {
	for _, subject := range []string{
		"$KV." + schemas.BucketWeights + ".fe-east",
		"$JS.API.STREAM.DELETE.KV_" + schemas.BucketWeights,
	} {
		if err := dp.Publish(subject, []byte(`{"version":999}`)); err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
		if err := dp.Flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
		select {
		case err := <-asyncErrs:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
				t.Errorf("publish to %s: got error %v, want a permissions violation for it", subject, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("dataplane published to %s without a permissions violation", subject)
		}
	}
	e, err := okv.Get(context.Background(), "fe-east")
	if err != nil || string(e.Value()) != `{"version":2}` {
		t.Errorf("after the refused writes fe-east = %v, %v; want version 2 unchanged", e, err)
	}
}

// checkDataplanesSharePending: a second data plane, the same user,
// receives what the first publishes on schemas.SubjectPending (the
// pending prefill they share), with no permissions violation.
func checkDataplanesSharePending(t *testing.T, srv *server.Server, dp *nats.Conn, asyncErrs <-chan error) {
	other, otherErrs := connectNATS(t, srv, "dataplane", testDataplanePassword)
	defer other.Close()
	sub, err := other.SubscribeSync(schemas.SubjectPending)
	if err != nil {
		t.Fatalf("subscribe %s: %v", schemas.SubjectPending, err)
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	msg := `{"source":"dp-1","seq":1,"engines":{"east-0":1200}}`
	if err := dp.Publish(schemas.SubjectPending, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(got.Data) != msg {
		t.Fatalf("pending prefill between data planes: %v, %v", got, err)
	}
	for _, ch := range []<-chan error{asyncErrs, otherErrs} {
		select {
		case err := <-ch:
			t.Errorf("sharing pending prefill: %v", err)
		default:
		}
	}
}

// startNATSFromConfig starts a nats-server with deploy/nats/nats.conf, on
// a free port, with its JetStream store in a temporary folder.
func startNATSFromConfig(t *testing.T) *server.Server {
	t.Helper()
	opts := loadNATSConfig(t)
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.HTTPPort = 0 // monitoring off: no fixed port to collide on
	opts.StoreDir = t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server from %s: %v", natsConfPath, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("nats-server not ready")
	}
	return srv
}

// connectNATS connects as user; asynchronous errors (permission
// violations) arrive on the returned channel.
func connectNATS(t *testing.T, srv *server.Server, user, password string) (*nats.Conn, <-chan error) {
	t.Helper()
	errs := make(chan error, 8)
	nc, err := nats.Connect(srv.ClientURL(),
		nats.UserInfo(user, password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	return nc, errs
}

func mustJetStream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
