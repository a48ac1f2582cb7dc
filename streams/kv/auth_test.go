package kv_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// Test-only password: distinctive, so a leak is found by a plain search.
const (
	authUser, authPass = "optimizer", "kv-right-pw-Hn4"
	wrongPass          = "kv-wrong-pw-Tc9"
)

// passwordNATS starts a server that knows one user, authUser/authPass,
// and returns its host:port.
func passwordNATS(t *testing.T) string {
	t.Helper()
	return streamstest.NATSWithUsers(t, streamstest.User{Name: authUser, Password: authPass})
}

func authConfig(url string, log *slog.Logger) kv.Config {
	cfg := kv.DefaultConfig()
	cfg.URL, cfg.Logger = url, log
	cfg.ReconnectWait, cfg.ConnectTimeout = 20*time.Millisecond, 2*time.Second
	return cfg
}

// TestWrongPasswordIsNamed: a wrong password gets the server's reason,
// "authorization violation", and a hint, whether Connect fails at once
// or (RetryOnFailedConnect, as the services run) the connection is
// closed in the background: then the close is logged at Error with the
// reason and ConnError reports it. The password is in neither.
func TestWrongPasswordIsNamed(t *testing.T) {
	host := passwordNATS(t)
	wrong := fmt.Sprintf("nats://%s:%s@%s", authUser, wrongPass, host)

	_, _, err := kv.Connect(t.Context(), authConfig(wrong, nil))
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") ||
		!strings.Contains(err.Error(), "check the user and password") || strings.Contains(err.Error(), wrongPass) {
		t.Fatalf("Connect with a wrong password: %v; want the authorization violation and a hint, no password", err)
	}

	var logs streamstest.LogBuffer
	cfg := authConfig(wrong, slog.New(slog.NewTextHandler(&logs, nil)))
	cfg.RetryOnFailedConnect = true
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Connect with RetryOnFailedConnect: %v", err)
	}
	defer nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !nc.IsClosed() {
		if time.Now().After(deadline) {
			t.Fatalf("connection with a wrong password still %v", nc.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cerr := kv.ConnError(nc)
	if !errors.Is(cerr, nats.ErrConnectionClosed) || !strings.Contains(strings.ToLower(cerr.Error()), "authorization violation") {
		t.Fatalf("ConnError = %v; want a closed connection naming the authorization violation", cerr)
	}
	if _, err := js.KeyValue(ctxTimeout(t, time.Second), "ilb-weights"); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("KeyValue on the closed connection: %v", err)
	}
	logs.WaitFor(t, 5*time.Second, regexp.MustCompile(`level=ERROR`))
	out := logs.String()
	if !strings.Contains(strings.ToLower(out), "authorization violation") || !strings.Contains(out, "hint=") ||
		strings.Contains(out, wrongPass) {
		t.Fatalf("log does not name the authorization violation with a hint (or leaks the password):\n%s", out)
	}
}

// TestClosingIsNotAnError: a connection the program closes is logged at
// Info, and ConnError says closed without blaming the server.
func TestClosingIsNotAnError(t *testing.T) {
	var logs streamstest.LogBuffer
	cfg := authConfig(fmt.Sprintf("nats://%s:%s@%s", authUser, authPass, passwordNATS(t)),
		slog.New(slog.NewTextHandler(&logs, nil)))
	nc, _, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.ConnError(nc); err != nil {
		t.Fatalf("ConnError of a live connection = %v", err)
	}
	nc.Close()
	logs.WaitFor(t, 5*time.Second, regexp.MustCompile(`nats: connection closed`))
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a deliberate close logged an error:\n%s", logs.String())
	}
	if err := kv.ConnError(nc); !errors.Is(err, nats.ErrConnectionClosed) || strings.Contains(err.Error(), "by the server") {
		t.Fatalf("ConnError after Close = %v", err)
	}
}

// TestPasswordApartFromURL: Config.Password (what --nats-password-file
// and ILB_NATS_PASSWORD fill) authenticates the URL's user; a wrong one
// is refused as a wrong password in the URL is; conflicting or
// incomplete settings are rejected before dialling.
func TestPasswordApartFromURL(t *testing.T) {
	host := passwordNATS(t)
	cfg := authConfig(fmt.Sprintf("nats://%s@%s", authUser, host), nil)
	cfg.Password = authPass
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatalf("user in the URL, password apart: %v", err)
	}
	defer nc.Close()
	if _, err := js.AccountInfo(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("JetStream with the password apart: %v", err)
	}
	cfg.URL, cfg.User = "nats://"+host, authUser // the user as a field
	nc2, _, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatalf("user as a field: %v", err)
	}
	nc2.Close()

	cfg.Password = wrongPass
	if _, _, err := kv.Connect(t.Context(), cfg); err == nil ||
		!strings.Contains(strings.ToLower(err.Error()), "authorization violation") || strings.Contains(err.Error(), wrongPass) {
		t.Fatalf("wrong password apart from the URL: %v", err)
	}
	for name, mut := range map[string]func(*kv.Config){
		"password twice":  func(c *kv.Config) { c.URL = fmt.Sprintf("nats://%s:%s@%s", authUser, authPass, host) },
		"no user":         func(c *kv.Config) { c.User = "" },
		"two users":       func(c *kv.Config) { c.URL = "nats://other@" + host },
		"user, no pass":   func(c *kv.Config) { c.Password = "" },
		"password + nkey": func(c *kv.Config) { c.NKeyFile = "seed.nk" },
	} {
		c := authConfig("nats://"+host, nil)
		c.User, c.Password = authUser, authPass
		mut(&c)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), authPass) {
			t.Errorf("%s: error leaks the password: %v", name, err)
		}
	}
}

// operator is an operator-mode (JWT) NATS setup made in the test: an
// operator, its system account (JetStream needs one), one account with
// JetStream, and users signed by the account.
type operator struct {
	claims          *jwt.OperatorClaims
	account, system nkeys.KeyPair
	accJWT, sysJWT  string
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	opKey, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	opPub, _ := opKey.PublicKey()
	o := &operator{claims: jwt.NewOperatorClaims(opPub)}
	o.claims.Name = "ilb-test"
	o.system, o.sysJWT = newAccount(t, opKey, "SYS", nil)
	o.claims.SystemAccount, _ = o.system.PublicKey()
	if _, err := o.claims.Encode(opKey); err != nil {
		t.Fatal(err)
	}
	o.account, o.accJWT = newAccount(t, opKey, "ILB", func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	})
	return o
}

// newAccount makes an account signed by opKey and returns its key and JWT.
func newAccount(t *testing.T, opKey nkeys.KeyPair, name string, edit func(*jwt.AccountClaims)) (nkeys.KeyPair, string) {
	t.Helper()
	key, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := key.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	if edit != nil {
		edit(ac)
	}
	token, err := ac.Encode(opKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, token
}

// start runs a nats-server trusting the operator, with the account
// preloaded in a memory resolver.
func (o *operator) start(t *testing.T) string {
	t.Helper()
	res := &server.MemAccResolver{}
	accPub, _ := o.account.PublicKey()
	sysPub, _ := o.system.PublicKey()
	for pub, token := range map[string]string{accPub: o.accJWT, sysPub: o.sysJWT} {
		if err := res.Store(pub, token); err != nil {
			t.Fatal(err)
		}
	}
	return streamstest.NATSWithOptions(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{o.claims},
		AccountResolver: res, SystemAccount: sysPub}).Addr().String()
}

// creds writes a .creds file for a new user of the account (signed by
// signer, normally the account's key), with publish permissions edited
// by perm.
func (o *operator) creds(t *testing.T, name string, signer nkeys.KeyPair, perm func(*jwt.Permissions)) string {
	t.Helper()
	uKey, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	uPub, _ := uKey.PublicKey()
	seed, _ := uKey.Seed()
	uc := jwt.NewUserClaims(uPub)
	uc.Name = name
	if perm != nil {
		perm(&uc.Permissions)
	}
	uJWT, err := uc.Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jwt.FormatUserConfig(uJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCredsFileOperatorMode: with a server in operator (JWT) mode,
// Config.CredsFile (--nats-creds) connects a writer that creates the
// weights bucket and writes and reads it; a reader whose JWT denies
// publishing to the bucket's subjects reads it, and its write fails with
// ErrNotPermitted naming the refused subject, not a bare timeout; a user
// signed by an account the server does not know is refused with the
// authorization violation named.
func TestCredsFileOperatorMode(t *testing.T) {
	op := newOperator(t)
	host := op.start(t)
	url := "nats://" + host

	writer := authConfig(url, nil)
	writer.CredsFile = op.creds(t, "optimizer", op.account, nil)
	_, wjs := connectWith(t, writer)
	b := bucket(t, wjs, 8)
	ctx := ctxTimeout(t, 10*time.Second)
	rev, err := kv.Put(ctx, b, "fe-a", []byte(`{"version":1}`), 0)
	if err != nil {
		t.Fatalf("put with the writer's creds: %v", err)
	}

	reader := authConfig(url, nil)
	reader.CredsFile = op.creds(t, "dataplane", op.account, func(p *jwt.Permissions) {
		p.Pub.Deny.Add("$KV.ilb-weights.>", "$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>")
	})
	_, rjs := connectWith(t, reader)
	rb, err := rjs.KeyValue(ctx, "ilb-weights")
	if err != nil {
		t.Fatalf("reader opens the bucket: %v", err)
	}
	if e, err := kv.Get(ctx, rb, "fe-a"); err != nil || e.Revision != rev {
		t.Fatalf("reader gets %+v, %v; want revision %d", e, err, rev)
	}
	_, err = kv.Put(ctxTimeout(t, time.Second), rb, "fe-a", []byte(`{"version":999}`), rev)
	if !errors.Is(err, kv.ErrNotPermitted) || !strings.Contains(err.Error(), `"$KV.ilb-weights.fe-a"`) {
		t.Fatalf("reader's put: %v; want ErrNotPermitted naming $KV.ilb-weights.fe-a", err)
	}
	t.Logf("reader's put: %v", err)
	if _, err := kv.EnsureBucket(ctxTimeout(t, time.Second), rjs, kv.DefaultBucketConfig("ilb-weights")); !errors.Is(err, kv.ErrNotPermitted) {
		t.Fatalf("reader's EnsureBucket: %v; want ErrNotPermitted", err)
	}
	if e, err := kv.Get(ctx, b, "fe-a"); err != nil || e.Revision != rev {
		t.Fatalf("after the refused put the key is %+v, %v; want revision %d unchanged", e, err, rev)
	}

	stranger, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	bad := authConfig(url, nil)
	bad.CredsFile = op.creds(t, "stranger", stranger, nil)
	if _, _, err := kv.Connect(t.Context(), bad); err == nil ||
		!strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("creds of an unknown account: %v; want the authorization violation", err)
	}
}

func connectWith(t *testing.T, cfg kv.Config) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}
