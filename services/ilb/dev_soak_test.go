package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// TestDevClusterSoak is `ilb dev --nats-cluster 3 --duration 15s`: NATS
// runs as three nodes with the weights bucket on three replicas, the fleet
// runs unattended, stops by itself, exits 0 and prints the soak summary
// with no failed request.
func TestDevClusterSoak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := startDev(t, "--nats-cluster", "3", "--duration", "15s", "--swing=false", "--progress", "0")
	if n := len(strings.Split(d.info.NATS, ",")); n != 3 {
		t.Fatalf("ready file names %d NATS URLs (%q), want 3", n, d.info.NATS)
	}
	if !strings.Contains(d.stdout.String(), "cluster of 3 nodes; bucket ilb-weights with 3 replicas") {
		t.Errorf("banner does not describe the cluster:\n%s", d.stdout.String())
	}
	checkR3(t, d.info.NATS)
	var code int
	select {
	case code = <-d.done:
	case <-time.After(60 * time.Second):
		d.cancel()
		t.Fatal("ilb dev --duration 15s still running after 60 s")
	}
	out := d.stdout.String()
	if code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, d.stderr.String())
	}
	m := regexp.MustCompile(`requests +(\d+) sent, (\d+) ok, (\d+) shed \([0-9.]+%\), (\d+) failed picks`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no soak summary:\n%s", out)
	}
	sent, _ := strconv.Atoi(m[1])
	if sent == 0 || m[4] != "0" {
		t.Errorf("soak: %s requests sent, %s failed; want some sent and none failed", m[1], m[4])
	}
	for _, want := range []string{"snapshot age p50", "heap         start", "goroutines   start", "mean load"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	t.Logf("soak summary:\n%s", out[strings.Index(out, "ilb dev: soak"):])
}

// checkR3 checks that the weights bucket's stream has three replicas.
func checkR3(t *testing.T, urls string) {
	t.Helper()
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "KV_ilb-weights")
	if err != nil {
		t.Fatalf("weights stream: %v", err)
	}
	info := st.CachedInfo()
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Errorf("weights stream: %d replicas, cluster %+v; want 3", info.Config.Replicas, info.Cluster)
	}
}
