package optimizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kafka"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// Test-only password: distinctive, so a leak is found by a plain search.
const wrongNATSPassword = "opt-wrong-pw-Qz7"

// wrongPasswordNATS starts a nats-server with JetStream that knows only
// optimizer/right-pw, and connects to it as optimizer with the wrong
// password in the background (RetryOnFailedConnect), as ilb optimizer
// does. The connection closes with the test.
func wrongPasswordNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	addr := streamstest.NATSWithUsers(t, streamstest.User{Name: "optimizer", Password: "right-pw"})
	cfg := kv.DefaultConfig()
	cfg.URL = "nats://optimizer@" + addr
	cfg.Password, cfg.RetryOnFailedConnect, cfg.ReconnectWait = wrongNATSPassword, true, 20*time.Millisecond
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// runUntilDone runs o until Run returns or 20 s pass, and returns Run's
// error; a Run still going after 20 s fails the test.
func runUntilDone(t *testing.T, o *Optimizer) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := o.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run waited for the bucket until the deadline on a connection the server closed (%v)", err)
	}
	return err
}

// newAuthOptimizer returns an optimizer on js (and nc, when not nil)
// that logs to logs. Its Kafka is never reached: Run stops before
// consuming, and until then logs only from the goroutine calling Run.
func newAuthOptimizer(t *testing.T, js jetstream.JetStream, nc *nats.Conn, logs *bytes.Buffer) *Optimizer {
	t.Helper()
	kc := kafka.DefaultClientConfig()
	kc.Brokers = []string{"127.0.0.1:1"}
	o, err := New(testConfig(schemas.ExampleFleetOneModel(), "opt-auth"), Deps{JetStream: js, NATS: nc, Kafka: &kc,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestWrongNATSPasswordEndsRunWithTheReason: an optimizer whose NATS
// password is wrong does not retry opening the bucket forever on a
// closed connection. Run ends with the server's reason and a hint, the
// reason is logged once at Error and kept as the state's last error,
// /healthz is unready, and the password appears nowhere.
func TestWrongNATSPasswordEndsRunWithTheReason(t *testing.T) {
	nc, js := wrongPasswordNATS(t)
	var logs bytes.Buffer
	o := newAuthOptimizer(t, js, nc, &logs)
	err := runUntilDone(t, o)
	msg := fmt.Sprint(err)
	if !strings.Contains(strings.ToLower(msg), "authorization violation") ||
		!strings.Contains(msg, "check the user and password") || strings.Contains(msg, wrongNATSPassword) {
		t.Fatalf("Run = %v; want the authorization violation with a hint, and no password", err)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || strings.Contains(logs.String(), wrongNATSPassword) {
		t.Errorf("%d Error lines, want 1 without the password; logs:\n%s", n, logs.String())
	}
	if st := o.State(); !strings.Contains(strings.ToLower(st.LastError), "authorization violation") {
		t.Errorf("state last_error %q, want the server's reason", st.LastError)
	}
	checkUnready(t, o, "optimizer nats", "optimizer bucket")
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if b := strings.ToLower(rec.Body.String()); !strings.Contains(b, `"reason":`) || !strings.Contains(b, "authorization violation") {
		t.Errorf("/healthz does not say why: %s", rec.Body)
	}
}

// TestClosedNATSEndsRunWithoutConn: without Deps.NATS the optimizer
// cannot ask the connection why, but a bucket error saying the
// connection is closed still ends Run rather than a retry loop.
func TestClosedNATSEndsRunWithoutConn(t *testing.T) {
	nc, js := wrongPasswordNATS(t)
	waitFor(t, 10*time.Second, "the server to close the connection", nc.IsClosed)
	var logs bytes.Buffer
	o := newAuthOptimizer(t, js, nil, &logs)
	if err := runUntilDone(t, o); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Run = %v; want nats.ErrConnectionClosed", err)
	}
	checkUnready(t, o, "optimizer bucket")
}

// checkUnready checks that GET /healthz answers 503 with the named
// components not ready.
func checkUnready(t *testing.T, o *Optimizer, names ...string) {
	t.Helper()
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	var body struct {
		Components []struct {
			Name  string `json:"name"`
			Ready bool   `json:"ready"`
		} `json:"components"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz: %d %s (%v), want 503", rec.Code, rec.Body, err)
	}
	for _, n := range names {
		found := false
		for _, c := range body.Components {
			if c.Name == n {
				found = true
				if c.Ready {
					t.Errorf("/healthz: %s ready, want unready", n)
				}
			}
		}
		if !found {
			t.Errorf("/healthz: no component %s in %s", n, rec.Body)
		}
	}
}
