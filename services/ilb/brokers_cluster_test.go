package main

import (
	"flag"

	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/streams/embedded"
)

// TestBrokersNATSCluster is `ilb brokers --nats-cluster 3`: three nodes,
// their URLs printed as one --nats value, an R3 bucket through them.
func TestBrokersNATSCluster(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := startBrokers(t, "--kafka-listen", "", "--nats-listen", "127.0.0.1:0", "--nats-cluster", "3",
		"--nats-cluster-listen", "127.0.0.1:0")
	out := p.out.String()
	m := regexp.MustCompile(`nats: (\S+)\n`).FindStringSubmatch(out)
	if m == nil || len(strings.Split(m[1], ",")) != 3 || !strings.Contains(out, "nats cluster: 3 nodes") {
		t.Fatalf("output does not name three nodes:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	nc, err := nats.Connect(m[1])
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ilb-weights", Replicas: 3})
	if err == nil {
		_, err = kv.Put(ctx, "fe-a", []byte("{}"))
	}
	nc.Close()
	if err != nil {
		t.Fatalf("R3 bucket on the cluster: %v", err)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after interrupt, want 0", code)
	}
}

func TestBrokersNATSClusterBadFlagsExit2(t *testing.T) {
	for name, args := range map[string][]string{
		"routes without cluster": {"--nats-routes", "nats://127.0.0.1:6222"},
		"one node alone":         {"--nats-cluster", "1"},
		"too many":               {"--nats-cluster", "12"},
	} {
		code, _, errs := run(t, append([]string{"brokers", "--kafka-listen", ""}, args...)...)
		if code != 2 || errs == "" {
			t.Errorf("%s: exit %d, stderr %q; want 2 and a message", name, code, errs)
		}
	}
}

func TestSyncClustersDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--nats-cluster", "3"}, true},
		{[]string{"--nats-cluster", "3", "--sync-always=false"}, false},
		{[]string{"--sync-always"}, true},
	} {
		cfg := embeddedDefault()
		fs := newTestFlagSet(&cfg)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		syncClusters(fs, &cfg)
		if cfg.SyncAlways != c.want {
			t.Errorf("%v: SyncAlways %v, want %v", c.args, cfg.SyncAlways, c.want)
		}
	}
}

func embeddedDefault() embedded.Config { return embedded.DefaultConfig() }

func newTestFlagSet(cfg *embedded.Config) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.BoolVar(&cfg.SyncAlways, "sync-always", false, "")
	addNATSClusterFlags(fs, cfg)
	return fs
}
