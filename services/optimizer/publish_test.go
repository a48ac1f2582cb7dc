package optimizer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

func TestPublishWritesManifestAndClusters(t *testing.T) {
	p, js := newPublisher(t, "opt-a")
	ctx := testCtx(t, 20*time.Second)
	for i, want := range []uint64{1, 2} {
		r, err := p.Publish(ctx, []*schemas.Snapshot{
			snap("fe-a", map[string]float64{"e1": 0.5, "e2": 0.5}, 0),
			snap("fe-b", map[string]float64{"e1": 0.9}, 0.1),
		})
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if r.Version != want || strings.Join(r.Written, ",") != "fe-a,fe-b" {
			t.Fatalf("publish %d: %+v, want version %d written to fe-a,fe-b", i, r, want)
		}
	}
	m, _, err := p.Manifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 2 || m.Clusters["fe-a"] != 2 || m.Clusters["fe-b"] != 2 || m.Leader != "opt-a" {
		t.Fatalf("manifest %+v, want version 2 for both clusters, leader opt-a", m)
	}
	// A third publish of only fe-a keeps fe-b's entry in the manifest.
	if _, err := p.Publish(ctx, []*schemas.Snapshot{snap("fe-a", map[string]float64{"e2": 1}, 0)}); err != nil {
		t.Fatal(err)
	}
	m, _, _ = p.Manifest(ctx)
	if m.Version != 3 || m.Clusters["fe-a"] != 3 || m.Clusters["fe-b"] != 2 {
		t.Fatalf("manifest after a partial publish %+v", m)
	}
	e, err := kv.Get(ctx, p.Bucket(), "fe-a")
	if err != nil {
		t.Fatal(err)
	}
	s, err := schemas.DecodeSnapshot(e.Value)
	if err != nil || s.Version != 3 || s.Weights["e2"] != 1 || s.CreatedAt.IsZero() {
		t.Fatalf("fe-a holds %+v (%v)", s, err)
	}
	_ = js
}

func TestPublishRejectsBadSnapshotsBeforeClaiming(t *testing.T) {
	p, _ := newPublisher(t, "opt-a")
	ctx := testCtx(t, 10*time.Second)
	_, err := p.Publish(ctx, []*schemas.Snapshot{snap("fe-a", map[string]float64{"e1": 0.7}, 0)}) // sums to 0.7
	if !errors.Is(err, schemas.ErrInvalid) {
		t.Fatalf("invalid snapshot: %v, want schemas.ErrInvalid", err)
	}
	if m, rev, _ := p.Manifest(ctx); m != nil || rev != 0 {
		t.Fatalf("a rejected publish claimed a version: manifest %+v", m)
	}
}

// TestConcurrentPublishersNeverConflict runs several publishers against one
// bucket at once, each publishing snapshots whose content names the
// publisher and its attempt, and checks the whole history: every manifest
// and every cluster key only ever moves to a higher version, no version
// appears twice on a key, and all keys written at one version carry the
// same publisher's content.
func TestConcurrentPublishersNeverConflict(t *testing.T) {
	p0, js := newPublisher(t, "opt-0")
	ctx := testCtx(t, 60*time.Second)
	const writers, attempts = 4, 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	okByWriter := map[string]int{}
	for w := range writers {
		pub := p0
		if w > 0 {
			pub = openPublisher(t, js, fmt.Sprintf("opt-%d", w))
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for a := range attempts {
				tag := fmt.Sprintf("opt-%d/%d", w, a)
				share := 0.1 + 0.8*rng.Float64()
				s1 := snap("fe-a", map[string]float64{"e1": share, "e2": 1 - share}, 0)
				s2 := snap("fe-b", map[string]float64{"e1": 1 - share, "e2": share}, 0)
				s1.InputsDigest, s2.InputsDigest = tag, tag
				_, err := pub.Publish(ctx, []*schemas.Snapshot{s1, s2})
				switch {
				case errors.Is(err, ErrConflict):
				case err != nil:
					t.Errorf("%s: %v", tag, err)
				default:
					mu.Lock()
					okByWriter[fmt.Sprint(w)]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range okByWriter {
		total += n
	}
	if total == 0 {
		t.Fatal("no publish succeeded")
	}
	tagAt := map[uint64]string{}
	for _, key := range []string{"fe-a", "fe-b"} {
		hist, err := kv.History(ctx, p0.Bucket(), key)
		if err != nil {
			t.Fatal(err)
		}
		last := uint64(0)
		for _, e := range hist {
			s, err := schemas.DecodeSnapshot(e.Value)
			if err != nil {
				t.Fatalf("%s rev %d: %v", key, e.Revision, err)
			}
			if s.Version <= last {
				t.Fatalf("%s: version %d after %d (revision %d): not strictly increasing", key, s.Version, last, e.Revision)
			}
			last = s.Version
			if prev, ok := tagAt[s.Version]; ok && prev != s.InputsDigest {
				t.Fatalf("version %d carries two contents: %s and %s", s.Version, prev, s.InputsDigest)
			}
			tagAt[s.Version] = s.InputsDigest
		}
	}
	mh, err := kv.History(ctx, p0.Bucket(), schemas.ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(mh); i++ {
		a, _ := schemas.DecodeManifest(mh[i-1].Value)
		b, _ := schemas.DecodeManifest(mh[i].Value)
		if b.Version != a.Version+1 {
			t.Fatalf("manifest went from v%d to v%d", a.Version, b.Version)
		}
	}
	t.Logf("%d of %d publishes won (by writer %v); %d versions on the keys", total, writers*attempts, okByWriter, len(tagAt))
}

func TestPublishNeverOverwritesALaterVersion(t *testing.T) {
	p, _ := newPublisher(t, "opt-a")
	ctx := testCtx(t, 10*time.Second)
	// A later version is already on fe-a (as if another publisher claimed
	// v2 and wrote fe-a before this one wrote its v1).
	later, _ := schemas.EncodeSnapshot(&schemas.Snapshot{Version: 5, Cluster: "fe-a", Weights: map[string]float64{"e9": 1}})
	if _, err := kv.Put(ctx, p.Bucket(), "fe-a", later, 0); err != nil {
		t.Fatal(err)
	}
	r, err := p.Publish(ctx, []*schemas.Snapshot{snap("fe-a", map[string]float64{"e1": 1}, 0), snap("fe-b", map[string]float64{"e1": 1}, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.Superseded, ",") != "fe-a" || strings.Join(r.Written, ",") != "fe-b" {
		t.Fatalf("result %+v, want fe-a superseded and fe-b written", r)
	}
	e, _ := kv.Get(ctx, p.Bucket(), "fe-a")
	if s, _ := schemas.DecodeSnapshot(e.Value); s.Version != 5 {
		t.Fatalf("fe-a now at version %d, want 5 kept", s.Version)
	}
}

func TestPublishOverDeletedKey(t *testing.T) {
	p, _ := newPublisher(t, "opt-a")
	ctx := testCtx(t, 10*time.Second)
	if _, err := p.Publish(ctx, []*schemas.Snapshot{snap("fe-a", map[string]float64{"e1": 1}, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := p.Bucket().Delete(ctx, "fe-a"); err != nil {
		t.Fatal(err)
	}
	r, err := p.Publish(ctx, []*schemas.Snapshot{snap("fe-a", map[string]float64{"e2": 1}, 0)})
	if err != nil || r.Version != 2 || len(r.Written) != 1 {
		t.Fatalf("publish over a delete marker: %+v %v", r, err)
	}
}

func TestPublishCarriesTraceContext(t *testing.T) {
	p, js := newPublisher(t, "opt-a")
	p.prop = propagation.TraceContext{}
	ctx := testCtx(t, 10*time.Second)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	if _, err := p.Publish(trace.ContextWithSpanContext(ctx, sc), []*schemas.Snapshot{snap("fe-a", map[string]float64{"e1": 1}, 0)}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+schemas.BucketWeights)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "$KV."+schemas.BucketWeights+".fe-a")
	if err != nil {
		t.Fatal(err)
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if got := nats.Header(m.Header).Get("traceparent"); got != want {
		t.Errorf("message header traceparent %q, want %q", got, want)
	}
	if !strings.Contains(string(m.Data), `"traceparent":"`+want+`"`) {
		t.Errorf("value has no traceparent field: %s", m.Data)
	}
	if _, err := schemas.DecodeSnapshot(m.Data); err != nil {
		t.Errorf("the value with a traceparent field does not decode: %v", err)
	}
}

func TestHistoryAndRollback(t *testing.T) {
	p, _ := newPublisher(t, "opt-a")
	ctx := testCtx(t, 20*time.Second)
	for i := 1; i <= 4; i++ {
		w := float64(i) / 10
		if _, err := p.Publish(ctx, []*schemas.Snapshot{
			snap("fe-a", map[string]float64{"e1": w, "e2": 1 - w}, 0),
			snap("fe-b", map[string]float64{"e1": 1 - w, "e2": w}, 0),
		}); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := p.History(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 8 || hist[0].Snapshot.Version != 4 || hist[0].Cluster != "fe-a" || hist[7].Snapshot.Version != 1 {
		t.Fatalf("history: %d entries, first %+v", len(hist), hist[0])
	}
	r, err := p.Rollback(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 5 {
		t.Fatalf("rollback published version %d, want 5 (versions never decrease)", r.Version)
	}
	for _, c := range []string{"fe-a", "fe-b"} {
		e, _ := kv.Get(ctx, p.Bucket(), c)
		got, _ := schemas.DecodeSnapshot(e.Value)
		var old *schemas.Snapshot
		for _, h := range hist {
			if h.Cluster == c && h.Snapshot.Version == 2 {
				old = h.Snapshot
			}
		}
		if got.Version != 5 || !sameWeights(got.Weights, old.Weights) || got.ShedFraction != old.ShedFraction {
			t.Errorf("%s after rollback: %+v, want the weights of v2 %v at v5", c, got, old.Weights)
		}
	}
	if _, err := p.Rollback(ctx, 99, nil); !errors.Is(err, ErrNotInHistory) || !strings.Contains(err.Error(), "v1-v5") {
		t.Errorf("rollback to a version never published: %v, want ErrNotInHistory naming the kept range", err)
	}
	if r, err := p.Rollback(ctx, 3, []string{"fe-b"}); err != nil || strings.Join(r.Written, ",") != "fe-b" {
		t.Errorf("rollback of one cluster: %+v %v", r, err)
	}
}

func sameWeights(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestEnsureBucketKeepsOperatorSettings: a bucket that exists is used as
// it is; a starting optimizer must not rewrite an operator's settings.
func TestEnsureBucketKeepsOperatorSettings(t *testing.T) {
	js := jetStream(t, streamstest.NATS(t))
	ctx := testCtx(t, 10*time.Second)
	cfg := kv.DefaultBucketConfig(schemas.BucketWeights)
	cfg.History = 5
	if _, err := kv.EnsureBucket(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	b, err := EnsureWeightsBucket(ctx, js, schemas.BucketWeights, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 5 {
		t.Fatalf("history %d, want the operator's 5 kept", st.History())
	}
	fresh, err := EnsureWeightsBucket(ctx, js, "ilb-weights-new", 1)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := fresh.Status(ctx); st.History() != 64 {
		t.Fatalf("new bucket keeps %d revisions, want 64", st.History())
	}
}
