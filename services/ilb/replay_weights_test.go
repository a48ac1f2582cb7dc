package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/services/recorder"
	"github.com/ilb-router/ilb/streams/kv"
)

// TestReplayedDevSignalsGiveTheLiveWeights is issue #7's replay check, done
// as an operator would replay an incident: `ilb dev` runs (2 s windows, a
// demand swing so the weights move) while `ilb record` records its
// ilb.signals topic; then, on fresh `ilb brokers`, `ilb aggregator` and
// `ilb optimizer` run on the same fleet file and `ilb replay` plays the
// recording back, at 4× speed and as fast as it can. With the event clock both optimizers solve
// each feature window on the same rows, so they must publish the same
// sequence of snapshots: the same windows (inputs_as_of), the same inputs
// digest, and weights and shed fractions within the solver's tolerance.
// Windows near the end of the recording, which it holds only in part, are
// left out of the comparison.
func TestReplayedDevSignalsGiveTheLiveWeights(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ilb dev for 30 s")
	}
	const window = 2 * time.Second
	// A long --tick-wait: on a loaded CI machine a window's rows must not
	// be solved without a late partition's because of a stall (the
	// engines all report, so windows complete by the rows, not the wait).
	d := startDev(t, "--window", window.String(), "--profile-interval", "8s", "--rate", "8", "--tick-wait", "10s",
		"--swing-schedule", "fe-east*3@8s-20s", "--progress", "0")
	dir := t.TempDir()
	rec := filepath.Join(dir, "signals.arrow")
	code, stdout, stderr := run(t, "record", "--kafka", d.info.Kafka, "--topics", schemas.TopicSignals,
		"--out", rec, "--from", "start", "--duration", "30s")
	if code != 0 {
		t.Fatalf("ilb record: exit %d\n%s\n%s", code, stdout, stderr)
	}
	live := publishedSnapshots(t, d.info.NATS)
	d.stop(t)

	recs, err := recorder.ReadRecording(rec)
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, r := range recs {
		if r.Timestamp.After(last) {
			last = r.Timestamp
		}
	}
	// A window is whole in the recording if it closed (end + 1 s
	// out-of-order + 2 s lateness) well before the recording stopped.
	cutoff := last.Add(-window - 6*time.Second)
	t.Logf("recorded %d signal records; comparing windows ending by %s", len(recs), cutoff.Format(time.TimeOnly))

	fleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleet, schemas.ExampleFleetYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	want := upTo(live, cutoff)
	if len(want) < 6 {
		t.Fatalf("live run published only %d snapshots by the cutoff; the test needs the weights to move", len(want))
	}
	moved := false
	prev := map[string]*schemas.Snapshot{}
	for _, w := range want {
		if p, ok := prev[w.cluster]; ok && maxDiff(w.s, p) > 0.01 {
			moved = true
		}
		prev[w.cluster] = w.s
	}
	if !moved {
		t.Error("the live weights never moved by 0.01: the comparison proves little")
	}
	// Paced, and as fast as the brokers go: the aggregator keys features
	// by signals partition, so the optimizer knows when every partition
	// has passed a window however the partitions' records interleave.
	for _, speed := range []string{"4", "0"} {
		t.Run("speed="+speed, func(t *testing.T) {
			got := replayThroughServices(t, rec, fleet, window, speed, len(want), cutoff)
			sameSnapshots(t, want, got)
		})
	}
	t.Logf("%d snapshots over %d clusters; first and last of fe-east: %v → %v", len(want),
		len(schemas.ExampleFleet().Clusters), want[0].s.Weights, prev["fe-east"].Weights)
}

// replayThroughServices replays the recording rec into fresh `ilb
// brokers` running `ilb aggregator` and `ilb optimizer` on fleet, and
// returns the snapshots they publish for windows ending by cutoff, once
// there are at least n.
func replayThroughServices(t *testing.T, rec, fleet string, window time.Duration, speed string, n int, cutoff time.Time) []snapshotKey {
	t.Helper()
	b, kafkaAddr, natsAddr := startBrokersOnFreePorts(t)
	defer b.stop(t)
	agg := startCommand(t, "aggregator", "--kafka", kafkaAddr, "--fleet", fleet, "--window", window.String(),
		"--profile-interval", "8s", "--log-level", "warn")
	defer agg.stop(t)
	opt := startCommand(t, "optimizer", "--kafka", kafkaAddr, "--nats", "nats://"+natsAddr, "--fleet", fleet,
		"--id", "replay", "--tick-wait", "10s", "--log-level", "warn")
	defer opt.stop(t)
	// The live optimizer published its prior snapshot before any signal;
	// so does this one before the replay starts.
	waitUntil(t, 20*time.Second, "the replay optimizer's first snapshot", func() bool {
		return len(publishedSnapshots(t, "nats://"+natsAddr)) > 0
	})
	code, stdout, stderr := run(t, "replay", "--kafka", kafkaAddr, "--in", rec, "--speed", speed)
	if code != 0 {
		t.Fatalf("ilb replay: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var got []snapshotKey
	waitUntil(t, 30*time.Second, "the replayed windows' snapshots", func() bool {
		got = upTo(publishedSnapshots(t, "nats://"+natsAddr), cutoff)
		return len(got) >= n
	})
	return got
}

// sameSnapshots checks that the replay published the live sequence: the
// same windows and inputs, weights within the solver's tolerance.
func sameSnapshots(t *testing.T, want, got []snapshotKey) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("replay published %d snapshots by the cutoff, live %d", len(got), len(want))
	}
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.cluster != g.cluster || !w.asOf.Equal(g.asOf) || w.s.InputsDigest != g.s.InputsDigest {
			t.Fatalf("snapshot %d: live %s as of %s digest %s, replay %s as of %s digest %s",
				i, w.cluster, w.asOf.Format(time.TimeOnly), w.s.InputsDigest, g.cluster, g.asOf.Format(time.TimeOnly), g.s.InputsDigest)
		}
		if dist := maxDiff(w.s, g.s); dist > 1e-6 {
			t.Errorf("snapshot %d (%s as of %s): weights differ by up to %.3g\nlive   %v shed %v\nreplay %v shed %v",
				i, w.cluster, w.asOf.Format(time.TimeOnly), dist, w.s.Weights, w.s.ShedFraction, g.s.Weights, g.s.ShedFraction)
		}
	}
}

// snapshotKey is one published snapshot, ordered by window then cluster.
type snapshotKey struct {
	cluster string
	asOf    time.Time
	version uint64
	s       *schemas.Snapshot
}

// publishedSnapshots reads every snapshot kept in the weights bucket at
// url, ordered by version then cluster.
func publishedSnapshots(t *testing.T, url string) []snapshotKey {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cfg := kv.DefaultConfig()
	cfg.URL, cfg.Name = url, "test-history"
	nc, js, err := kv.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("nats %s: %v", url, err)
	}
	defer nc.Close()
	p, err := optimizer.NewPublisher(ctx, js, optimizer.PublisherConfig{Bucket: schemas.BucketWeights, ID: "test"})
	if err != nil {
		return nil // no bucket yet
	}
	hist, err := p.History(ctx, nil)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	var out []snapshotKey
	for _, h := range hist {
		if h.Snapshot != nil {
			out = append(out, snapshotKey{cluster: h.Cluster, asOf: h.Snapshot.InputsAsOf, version: h.Snapshot.Version, s: h.Snapshot})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].version != out[j].version {
			return out[i].version < out[j].version
		}
		return out[i].cluster < out[j].cluster
	})
	return out
}

// upTo keeps the snapshots of windows ending by cutoff (and the prior
// ones, of no window).
func upTo(s []snapshotKey, cutoff time.Time) []snapshotKey {
	var out []snapshotKey
	for _, k := range s {
		if !k.asOf.After(cutoff) {
			out = append(out, k)
		}
	}
	return out
}

// maxDiff is the largest difference of a weight or the shed fraction.
func maxDiff(a, b *schemas.Snapshot) float64 {
	d := math.Abs(a.ShedFraction - b.ShedFraction)
	for e, w := range a.Weights {
		d = max(d, math.Abs(w-b.Weights[e]))
	}
	for e, w := range b.Weights {
		d = max(d, math.Abs(w-a.Weights[e]))
	}
	return d
}

// command is an ilb subcommand running in a goroutine.
type cliCommand struct {
	name     string
	cancel   context.CancelFunc
	out, err *syncBuffer
	code     chan int
}

func startCommand(t *testing.T, args ...string) *cliCommand {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &cliCommand{name: args[0], cancel: cancel, out: &syncBuffer{}, err: &syncBuffer{}, code: make(chan int, 1)}
	go func() { c.code <- runMain(ctx, args, c.out, c.err) }()
	return c
}

// stop interrupts the command and checks it exits 0.
func (c *cliCommand) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	select {
	case code := <-c.code:
		if code != 0 {
			t.Errorf("ilb %s exited %d; stderr:\n%s", c.name, code, c.err.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("ilb %s did not stop within 20 s", c.name)
	}
}

func waitUntil(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
