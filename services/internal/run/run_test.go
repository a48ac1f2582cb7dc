package run

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGroupFirstExitStopsTheRest(t *testing.T) {
	var g Group
	stoppedB := make(chan struct{})
	g.Add("a", func(ctx context.Context) error { return errors.New("boom") })
	g.Add("b", func(ctx context.Context) error { <-ctx.Done(); close(stoppedB); return ctx.Err() })
	err := g.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "a: boom") {
		t.Fatalf("Run = %v, want the error of a wrapped with its name", err)
	}
	select {
	case <-stoppedB:
	default:
		t.Fatal("b was not stopped when a returned")
	}
}

func TestGroupCancelIsCleanStop(t *testing.T) {
	var g Group
	g.Add("a", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if err := g.Run(ctx); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

func TestGroupShutdownIsBounded(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	g := Group{ShutdownTimeout: 20 * time.Millisecond}
	g.Add("quits", func(ctx context.Context) error { return nil })
	g.Add("stuck", func(ctx context.Context) error { <-release; return nil })
	start := time.Now()
	if err := g.Run(context.Background()); !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Run = %v, want ErrShutdownTimeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
}

func TestHealthEndpoint(t *testing.T) {
	h := NewHealth()
	h.Set("kafka", true)
	h.Set("nats", false)
	srv, err := Listen(DefaultHTTPConfig("127.0.0.1:0"), h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	get := func() (int, string) {
		resp, err := http.Get("http://" + srv.Addr() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 503 || !strings.Contains(body, `"name":"nats","ready":false`) {
		t.Fatalf("unready: got %d %s", code, body)
	}
	h.SetReason("nats", false, "authorization violation")
	if code, body := get(); code != 503 || !strings.Contains(body, `"name":"nats","ready":false,"reason":"authorization violation"`) {
		t.Fatalf("unready with a reason: got %d %s", code, body)
	}
	h.Set("nats", true)
	if code, body := get(); code != 200 || !strings.Contains(body, `"status":"ok"`) || strings.Contains(body, "reason") {
		t.Fatalf("ready (reason dropped): got %d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("server Run = %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestHTTPConfigValidate(t *testing.T) {
	if err := (HTTPConfig{}).Validate(); err == nil {
		t.Fatal("empty config validated")
	}
	if _, err := Listen(DefaultHTTPConfig("127.0.0.1:notaport"), http.NotFoundHandler()); err == nil {
		t.Fatal("bad address listened")
	}
}
