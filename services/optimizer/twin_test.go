package optimizer

import (
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kv"
)

// checkBucketHistory reads every kept revision of the manifest and the
// clusters' keys and fails on a version that does not increase, or on
// one version with two different contents. It returns the manifest's
// leader at each version.
func checkBucketHistory(t *testing.T, b *brokers, f *schemas.Fleet) map[uint64]string {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	bucket, err := b.js.KeyValue(ctx, schemas.BucketWeights)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[uint64]string{}
	mh, err := kv.History(ctx, bucket, schemas.ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(0)
	for _, e := range mh {
		m, err := schemas.DecodeManifest(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != last+1 && last != 0 {
			t.Fatalf("manifest went from version %d to %d", last, m.Version)
		}
		last = m.Version
		leaders[m.Version] = m.Leader
	}
	for _, c := range f.Clusters {
		hist, err := kv.History(ctx, bucket, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		last := uint64(0)
		for _, e := range hist {
			s, err := schemas.DecodeSnapshot(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version <= last {
				t.Fatalf("%s: version %d after %d", c.Name, s.Version, last)
			}
			last = s.Version
			if _, ok := leaders[s.Version]; !ok && s.Version > firstKept(leaders) {
				t.Errorf("%s: version %d has no manifest claim", c.Name, s.Version)
			}
		}
	}
	return leaders
}

func firstKept(m map[uint64]string) uint64 {
	lo := ^uint64(0)
	for v := range m {
		lo = min(lo, v)
	}
	return lo
}

// TestTwoOptimizersWithoutLease: with leader election off both instances
// solve and publish on the same inputs at the same moments; the manifest
// compare-and-swap alone must keep every key's versions increasing and
// unique, and the losers count conflicts and reload.
func TestTwoOptimizersWithoutLease(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	b := newBrokers(t)
	a, stopA := b.start(t, testConfig(f, "opt-a"))
	c, stopC := b.start(t, testConfig(f, "opt-c"))
	waitFor(t, 10*time.Second, "the first version", func() bool { return b.version(t) >= 1 })
	for k := range 8 {
		_, snaps := b.served(t, f)
		b.produceFeatures(t, trafficRows(f, k, exampleDemand, weightsOf(snaps)))
		time.Sleep(60 * time.Millisecond)
	}
	stopA()
	stopC()
	leaders := checkBucketHistory(t, b, f)
	sa, sc := a.State(), c.State()
	t.Logf("opt-a: %d publishes, %d conflicts; opt-c: %d publishes, %d conflicts; %d versions",
		sa.Publishes, sa.Conflicts, sc.Publishes, sc.Conflicts, len(leaders))
	if sa.Publishes == 0 || sc.Publishes == 0 {
		t.Errorf("one instance never published (a %d, c %d): the test did not race them", sa.Publishes, sc.Publishes)
	}
	// Every version was claimed by exactly one instance, and every claim
	// but one cut short by each instance's shutdown completed.
	if n := sa.Publishes + sc.Publishes; n > uint64(len(leaders)) || n+2 < uint64(len(leaders)) {
		t.Errorf("%d successful publishes but %d manifest versions (last errors %q, %q)",
			n, len(leaders), sa.LastError, sc.LastError)
	}
}

// TestTwoOptimizersWithLease: with leader election on only the lease
// holder publishes; when it stops, the other takes over.
func TestTwoOptimizersWithLease(t *testing.T) {
	f := schemas.ExampleFleetOneModel()
	b := newBrokers(t)
	cfgA, cfgC := testConfig(f, "opt-a"), testConfig(f, "opt-c")
	cfgA.LeaseDuration, cfgC.LeaseDuration = 600*time.Millisecond, 600*time.Millisecond
	a, stopA := b.start(t, cfgA)
	waitFor(t, 10*time.Second, "opt-a to publish", func() bool { return b.version(t) >= 1 })
	c, stopC := b.start(t, cfgC)
	k := 0
	feed := func(n int) {
		for range n {
			_, snaps := b.served(t, f)
			b.produceFeatures(t, trafficRows(f, k, exampleDemand, weightsOf(snaps)))
			k++
			time.Sleep(60 * time.Millisecond)
		}
	}
	feed(6)
	if c.State().Publishes != 0 || c.State().Leader {
		t.Fatalf("the standby published %d times while the leader ran", c.State().Publishes)
	}
	stopA() // releases the lease
	v := b.version(t)
	waitFor(t, 10*time.Second, "opt-c to take over", func() bool {
		feed(1)
		return b.version(t) > v && c.State().Leader
	})
	stopC()
	leaders := checkBucketHistory(t, b, f)
	switched := false
	for ver := firstKept(leaders); ver < firstKept(leaders)+uint64(len(leaders)); ver++ {
		switch {
		case leaders[ver] == "opt-c":
			switched = true
		case switched:
			t.Errorf("version %d by %s after opt-c took over", ver, leaders[ver])
		}
	}
	if a.State().Publishes == 0 || !switched {
		t.Errorf("leaders by version: %v", leaders)
	}
}
