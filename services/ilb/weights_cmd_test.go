package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// publishVersions publishes n versions of two clusters' weights; version
// i gives fe-a weight i/10 on e1.
func publishVersions(t *testing.T, url string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := kv.DefaultConfig()
	cfg.URL = url
	nc, js, err := kv.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := optimizer.EnsureWeightsBucket(ctx, js, schemas.BucketWeights, 1); err != nil {
		t.Fatal(err)
	}
	p, err := optimizer.NewPublisher(ctx, js, optimizer.PublisherConfig{Bucket: schemas.BucketWeights, ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		w := float64(i) / 10
		if _, err := p.Publish(ctx, []*schemas.Snapshot{
			{Cluster: "fe-a", Weights: map[string]float64{"e1": w, "e2": 1 - w}, InputsAsOf: time.Date(2026, 12, 1, 10, 0, i, 0, time.UTC)},
			{Cluster: "fe-b", Weights: map[string]float64{"e1": 1}},
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWeightsHistoryAndRollback(t *testing.T) {
	url := streamstest.NATS(t)
	publishVersions(t, url, 3)

	code, out, errs := run(t, "weights", "history", "--nats", url)
	if code != 0 {
		t.Fatalf("history: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "VERSION") ||
		!strings.HasPrefix(lines[1], "3 ") || !strings.Contains(lines[1], "fe-a") ||
		!strings.Contains(lines[1], "e2=0.700 e1=0.300") || !strings.Contains(lines[0], "INPUTS_AS_OF") ||
		!strings.Contains(lines[1], "2026-12-01T10:00:03.000Z") {
		t.Fatalf("history output:\n%s", out)
	}
	code, out, _ = run(t, "weights", "history", "--nats", url, "--cluster", "fe-b", "--limit", "2")
	if code != 0 || strings.Count(out, "fe-b") != 2 || strings.Contains(out, "fe-a") {
		t.Fatalf("history of fe-b, 2 versions:\n%s", out)
	}

	code, out, errs = run(t, "weights", "rollback", "--nats", url, "--to", "1")
	if code != 0 || !strings.Contains(out, "published as v4 for fe-a, fe-b") {
		t.Fatalf("rollback: exit %d, %q %q", code, out, errs)
	}
	_, out, _ = run(t, "weights", "history", "--nats", url, "--limit", "1")
	if !strings.Contains(out, "4  ") || !strings.Contains(out, "e2=0.900 e1=0.100") {
		t.Fatalf("after the rollback v4 does not carry v1's weights:\n%s", out)
	}

	code, _, errs = run(t, "weights", "rollback", "--nats", url, "--to", "42")
	if code != 2 || !strings.Contains(errs, "not in the snapshot history") || !strings.Contains(errs, "v1-v4") {
		t.Fatalf("rollback to a missing version: exit %d, %q", code, errs)
	}
	if code, _, errs = run(t, "weights", "rollback", "--nats", url); code != 2 || !strings.Contains(errs, "--to VERSION is required") {
		t.Fatalf("rollback without --to: exit %d %q", code, errs)
	}
	if code, _, errs = run(t, "weights", "frob"); code != 2 || !strings.Contains(errs, "unknown subcommand") {
		t.Fatalf("unknown subcommand: exit %d %q", code, errs)
	}
}

func TestWeightsHistoryWithoutBucket(t *testing.T) {
	url := streamstest.NATS(t)
	code, _, errs := run(t, "weights", "history", "--nats", url)
	if code != 1 || !strings.Contains(errs, "has an optimizer published") {
		t.Fatalf("no bucket: exit %d %q", code, errs)
	}
}

func TestOptimizerCommandPublishes(t *testing.T) {
	kafkaAddrs := streamstest.Kafka(t)
	url := streamstest.NATS(t)
	fleet := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleet, schemas.ExampleFleetYAML(), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, "optimizer", "--nats", url); code != 2 || !strings.Contains(errs, "--fleet FILE is required") {
		t.Fatalf("no fleet: exit %d %q", code, errs)
	}
	if code, _, errs := run(t, "optimizer", "--nats", url, "--fleet", fleet, "--smooth-weights", "-1s"); code != 2 || !strings.Contains(errs, "(weights) must be >= 0") {
		t.Fatalf("negative --smooth-weights: exit %d %q", code, errs)
	}
	if code, _, errs := run(t, "optimizer", "--nats", url, "--fleet", fleet, "--smooth-reuse", "-1s"); code != 2 || !strings.Contains(errs, "(reuse) must be >= 0") {
		t.Fatalf("negative --smooth-reuse: exit %d %q", code, errs)
	}
	if code, _, errs := run(t, "optimizer", "--nats", url, "--fleet", fleet, "--smooth-calm", "-1s"); code != 2 || !strings.Contains(errs, "(calm) must be >= 0") {
		t.Fatalf("negative --smooth-calm: exit %d %q", code, errs)
	}
	if code, _, errs := run(t, "optimizer", "--nats", url, "--fleet", fleet, "--shape-output-alpha", "0"); code != 2 || !strings.Contains(errs, "shape output alpha 0") {
		t.Fatalf("--shape-output-alpha 0: exit %d %q", code, errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- runMain(ctx, []string{"optimizer", "--fleet", fleet, "--kafka", kafkaAddrs[0], "--nats", url,
			"--http", "127.0.0.1:0", "--id", "cmd-test", "--min-interval", "50ms"}, &out, &errb)
	}()
	cfg := kv.DefaultConfig()
	cfg.URL = url
	nc, js, err := kv.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := js.KeyValue(context.Background(), schemas.BucketWeights)
		if err == nil {
			if e, err := kv.Get(context.Background(), b, schemas.ManifestKey); err == nil {
				m, err := schemas.DecodeManifest(e.Value)
				if err != nil || m.Leader != "cmd-test" || len(m.Clusters) != 3 {
					t.Fatalf("manifest %+v %v", m, err)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no manifest after 15 s; stderr:\n%s", errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ilb optimizer did not stop")
	}
	if !strings.Contains(out.String(), "ilb optimizer cmd-test: 3 clusters, 6 engines -> bucket ilb-weights; state on http://127.0.0.1:") {
		t.Errorf("banner: %q", out.String())
	}
}
