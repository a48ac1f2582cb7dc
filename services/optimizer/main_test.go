package optimizer

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCtx is a context that ends with the test, bounded by d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// jetStream connects to url; the connection closes with the test.
func jetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	cfg := kv.DefaultConfig()
	cfg.URL = url
	nc, js, err := kv.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return js
}

// newPublisher starts a NATS server, creates the weights bucket and
// returns a publisher with the given id and its JetStream.
func newPublisher(t testing.TB, id string) (*Publisher, jetstream.JetStream) {
	t.Helper()
	js := jetStream(t, streamstest.NATS(t))
	ctx := testCtx(t, 10*time.Second)
	if _, err := EnsureWeightsBucket(ctx, js, schemas.BucketWeights, 1); err != nil {
		t.Fatal(err)
	}
	return openPublisher(t, js, id), js
}

func openPublisher(t testing.TB, js jetstream.JetStream, id string) *Publisher {
	t.Helper()
	p, err := NewPublisher(testCtx(t, 10*time.Second), js, PublisherConfig{Bucket: schemas.BucketWeights, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// snap is a table-less snapshot of cluster with the given weights.
func snap(cluster string, weights map[string]float64, shed float64) *schemas.Snapshot {
	return &schemas.Snapshot{Cluster: cluster, Weights: weights, ShedFraction: shed}
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
