package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestBrokersBadFlagsExit2(t *testing.T) {
	for name, args := range map[string][]string{
		"no port":         {"--kafka-listen", "127.0.0.1"},
		"bad port":        {"--nats-listen", "127.0.0.1:nats"},
		"nothing to run":  {"--kafka-listen", "", "--nats-listen", ""},
		"zero partitions": {"--partitions", "0"},
		"bad log level":   {"--log-level", "loud"},
		"stray argument":  {"now"},
	} {
		code, _, errs := run(t, append([]string{"brokers"}, args...)...)
		if code != 2 || errs == "" {
			t.Errorf("%s: exit %d, stderr %q; want 2 and a message", name, code, errs)
		}
	}
}

func TestBrokersHelpNamesTheFlags(t *testing.T) {
	code, out, _ := run(t, "brokers", "--help")
	for _, flag := range []string{"--kafka-listen", "--nats-listen", "--data-dir"} {
		if code != 0 || !strings.Contains(out, strings.TrimPrefix(flag, "-")) {
			t.Errorf("brokers --help (exit %d) does not mention %s:\n%s", code, flag, out)
		}
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is the output buffer of the command tests that run a
// subcommand in a goroutine while reading what it printed.
type syncBuffer = streamstest.LogBuffer

// brokersProc is `ilb brokers` running in a goroutine.
type brokersProc struct {
	cancel context.CancelFunc
	out    *syncBuffer
	code   chan int
}

func startBrokers(t *testing.T, args ...string) *brokersProc {
	t.Helper()
	p, err := tryStartBrokers(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStartBrokers is startBrokers returning why it did not start.
func tryStartBrokers(t *testing.T, args ...string) (*brokersProc, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &brokersProc{cancel: cancel, out: &syncBuffer{}, code: make(chan int, 1)}
	errb := &syncBuffer{}
	go func() { p.code <- runMain(ctx, append([]string{"brokers"}, args...), p.out, errb) }()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(p.out.String(), "ready;") {
		select {
		case c := <-p.code:
			cancel()
			return nil, fmt.Errorf("ilb brokers exited %d before ready; stderr:\n%s", c, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("ilb brokers not ready after 15s; stdout:\n%s", p.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p, nil
}

// startBrokersOnFreePorts starts `ilb brokers` with Kafka and NATS on
// ports that were free a moment ago, plus args; when one was taken in
// between (go test runs other packages beside this one), it starts again
// on other ports, up to five times. It returns the brokers and their
// Kafka and NATS addresses.
func startBrokersOnFreePorts(t *testing.T, args ...string) (p *brokersProc, kafkaAddr, natsAddr string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		kafkaAddr, natsAddr = freePort(t), freePort(t)
		p, err := tryStartBrokers(t, append([]string{"--kafka-listen", kafkaAddr, "--nats-listen", natsAddr}, args...)...)
		if err == nil {
			return p, kafkaAddr, natsAddr
		}
		if !portInUse(err) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("%v\nstarting again on other ports (attempt %d of 5)", err, attempt+1)
	}
}

// stop interrupts the command as SIGINT would and returns its exit code.
func (p *brokersProc) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	select {
	case c := <-p.code:
		return c
	case <-time.After(15 * time.Second):
		t.Fatal("ilb brokers did not stop within 15s of the interrupt")
		return -1
	}
}

func TestBrokersServeAndStopCleanly(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p, kafkaAddr, natsAddr := startBrokersOnFreePorts(t)
	out := p.out.String()
	for _, want := range []string{
		"kafka: " + kafkaAddr + "\n",
		"nats: nats://" + natsAddr + "\n",
		"kcat -b " + kafkaAddr + " -L",
		"nats --server nats://" + natsAddr + " kv ls",
		"data: in memory",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "ilb.signals", Value: []byte("x")}).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatalf("produce to the pre-created topic: %v", err)
	}
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	_, err = js.AccountInfo(ctx)
	nc.Close()
	if err != nil {
		t.Fatalf("JetStream: %v", err)
	}

	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after interrupt, want 0", code)
	}
	if c, err := net.DialTimeout("tcp", natsAddr, time.Second); err == nil {
		c.Close()
		t.Fatal("NATS port still open after exit")
	}
}

func TestBrokersDataDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	args := []string{"--kafka-listen", "", "--nats-listen", addr, "--data-dir", dir}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	p := startBrokers(t, args...)
	if !strings.Contains(p.out.String(), "data: "+dir) {
		t.Errorf("output does not name the data dir:\n%s", p.out.String())
	}
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ilb-weights", History: 64})
	if err == nil {
		_, err = kv.Put(ctx, "fe-a", []byte(`{"version":42}`))
	}
	nc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("first run exit %d", code)
	}

	p = startBrokers(t, args...)
	defer p.stop(t)
	nc, err = nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ = jetstream.New(nc)
	kv, err = js.KeyValue(ctx, "ilb-weights")
	if err != nil {
		t.Fatalf("bucket gone after restart: %v", err)
	}
	e, err := kv.Get(ctx, "fe-a")
	if err != nil || string(e.Value()) != `{"version":42}` {
		t.Fatalf("after restart: %v, %v", e, err)
	}
}

func TestBrokersPortInUseExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errs := run(t, "brokers", "--kafka-listen", ln.Addr().String(), "--nats-listen", "")
	if code != 1 || !strings.Contains(errs, "kafka listen") {
		t.Fatalf("port in use: exit %d, stderr %q", code, errs)
	}
}

// portInUse reports whether ilb brokers failed to start because a port
// it was given is taken (listenError's advice, or the listener's own
// error).
func portInUse(err error) bool {
	return strings.Contains(err.Error(), "is in use (") || strings.Contains(err.Error(), "address already in use")
}

// TestBrokersTakenPortReported: a port taken before ilb brokers binds it
// is reported as in use, which startBrokersOnFreePorts starts again on.
func TestBrokersTakenPortReported(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = tryStartBrokers(t, "--kafka-listen", freePort(t), "--nats-listen", held.Addr().String())
	if err == nil || !portInUse(err) {
		t.Fatalf("brokers on a taken NATS port: %v, want an in-use error", err)
	}
	_, err = tryStartBrokers(t, "--kafka-listen", held.Addr().String(), "--nats-listen", freePort(t))
	if err == nil || !portInUse(err) {
		t.Fatalf("brokers on a taken Kafka port: %v, want an in-use error", err)
	}
}
