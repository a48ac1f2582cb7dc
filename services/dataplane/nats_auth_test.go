package dataplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestWrongNATSPasswordEndsRunWithTheReason: a data plane whose NATS
// password is wrong (connecting in the background, as `ilb dataplane`
// does) does not wait for the weights bucket forever on a closed
// connection: Run ends with the server's reason and a hint to check
// the credentials, and without the password.
func TestWrongNATSPasswordEndsRunWithTheReason(t *testing.T) {
	const wrong = "dp-wrong-pw-Ux5"
	addr := streamstest.NATSWithUsers(t, streamstest.User{Name: "dataplane", Password: "right-pw"})
	cfg := kv.DefaultConfig()
	cfg.URL = "nats://dataplane@" + addr
	cfg.Password, cfg.RetryOnFailedConnect, cfg.ReconnectWait = wrong, true, 20*time.Millisecond
	nc, js, err := kv.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	d := newDP(t, testConfig("fe-a"), Deps{JetStream: js, NATS: nc})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = d.Run(ctx)
	msg := fmt.Sprint(err)
	if ctx.Err() != nil || !strings.Contains(strings.ToLower(msg), "authorization violation") ||
		!strings.Contains(msg, "check the user and password") || strings.Contains(msg, wrong) {
		t.Fatalf("Run = %v; want it to end at once naming the authorization violation with a hint", err)
	}
	t.Logf("Run: %v", err)
}
