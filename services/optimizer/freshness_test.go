package optimizer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
	"github.com/ilb-router/ilb/streams/embedded"
	"github.com/ilb-router/ilb/streams/kv"
)

// swapWatchers are data-plane stand-ins: one NATS connection per cluster,
// each watching its cluster's key as a data plane does, decoding the
// snapshot and its table (the work before a swap) and recording when each
// version was ready.
type swapWatchers struct {
	mu      sync.Mutex
	cond    *sync.Cond
	seen    map[string][]uint64             // cluster -> versions in arrival order
	swapped map[uint64]map[string]time.Time // version -> cluster -> when
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	errs    []error
}

func startWatchers(tb testing.TB, url string, clusters []string) *swapWatchers {
	tb.Helper()
	w := &swapWatchers{seen: map[string][]uint64{}, swapped: map[uint64]map[string]time.Time{}}
	w.cond = sync.NewCond(&w.mu)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	ready := make(chan struct{}, len(clusters))
	for _, c := range clusters {
		js := jetStream(tb, url)
		bucket, err := js.KeyValue(testCtx(tb, 10*time.Second), schemas.BucketWeights)
		if err != nil {
			tb.Fatal(err)
		}
		w.wg.Go(func() {
			err := kv.Watch(ctx, bucket, c, func(e kv.Entry) error { w.swap(c, e.Value); return nil },
				func() { ready <- struct{}{} })
			if err != nil {
				w.fail(err)
			}
		})
	}
	for range clusters {
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			tb.Fatal("watchers did not start")
		}
	}
	return w
}

func (w *swapWatchers) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *swapWatchers) swap(cluster string, value []byte) {
	s, err := schemas.DecodeSnapshot(value)
	if err == nil && s.Table != nil {
		_, err = sched.Decode(s.Table.Slots, s.Table.Engines, s.Table.Encoding, s.Table.Data)
	}
	now := time.Now()
	if err != nil {
		w.fail(fmt.Errorf("%s: %w", cluster, err))
		return
	}
	w.mu.Lock()
	w.seen[cluster] = append(w.seen[cluster], s.Version)
	if w.swapped[s.Version] == nil {
		w.swapped[s.Version] = map[string]time.Time{}
	}
	w.swapped[s.Version][cluster] = now
	w.mu.Unlock()
	w.cond.Broadcast()
}

// waitAll waits until every cluster swapped version v and returns when
// the last one did.
func (w *swapWatchers) waitAll(v uint64, clusters int, timeout time.Duration) (time.Time, error) {
	timer := time.AfterFunc(timeout, w.cond.Broadcast)
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.swapped[v]) < clusters && len(w.errs) == 0 {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("version %d: %d of %d clusters swapped after %v", v, len(w.swapped[v]), clusters, timeout)
		}
		w.cond.Wait()
	}
	if len(w.errs) > 0 {
		return time.Time{}, w.errs[0]
	}
	last := time.Time{}
	for _, t := range w.swapped[v] {
		if t.After(last) {
			last = t
		}
	}
	return last, nil
}

func (w *swapWatchers) stop() {
	w.cancel()
	w.wg.Wait()
}

// exampleSnapshots are the example fleet's three clusters' snapshots with
// tables, each call moving the weights a little, as successive solves do.
type exampleSnapshots struct {
	tables map[string]*sched.Table
	i      int
}

func (e *exampleSnapshots) next(tb testing.TB) []*schemas.Snapshot {
	tb.Helper()
	f := schemas.ExampleFleetOneModel()
	if e.tables == nil {
		e.tables = map[string]*sched.Table{}
	}
	e.i++
	var out []*schemas.Snapshot
	for ci, c := range f.Clusters {
		engines := f.EligibleEngines(c)
		w := map[string]float64{}
		total := 0.0
		for j, fe := range engines {
			w[fe.Name] = 1 + 0.3*float64((e.i+j+ci)%5)
			total += w[fe.Name]
		}
		for k := range w {
			w[k] /= total
		}
		t, err := buildTable(e.tables[c.Name], w)
		if err != nil {
			tb.Fatal(err)
		}
		e.tables[c.Name] = t
		slots, names, enc, data := t.Encode()
		out = append(out, &schemas.Snapshot{Cluster: c.Name, Weights: w,
			Table: &schemas.SnapshotTable{Slots: slots, Engines: names, Encoding: enc, Data: data}})
	}
	return out
}

// measureSwaps publishes n versions one after another, each once every
// watcher swapped the previous one, and returns the publish-to-swap time
// of each: from the start of Publish to the last of the three swaps.
func measureSwaps(tb testing.TB, url string, n int) []time.Duration {
	tb.Helper()
	js := jetStream(tb, url)
	ctx := testCtx(tb, 5*time.Minute)
	if _, err := EnsureWeightsBucket(ctx, js, schemas.BucketWeights, 1); err != nil {
		tb.Fatal(err)
	}
	pub := openPublisher(tb, js, "bench")
	clusters := []string{"fe-east", "fe-west", "fe-eu"}
	w := startWatchers(tb, url, clusters)
	defer w.stop()
	var gen exampleSnapshots
	versions := make([][]*schemas.Snapshot, n)
	for i := range versions {
		versions[i] = gen.next(tb)
	}
	lat := make([]time.Duration, 0, n)
	if b, ok := tb.(*testing.B); ok {
		b.ReportAllocs()
		b.ResetTimer() // the publishes only: not the brokers, watchers or tables
	}
	for _, snaps := range versions {
		start := time.Now()
		r, err := pub.Publish(ctx, snaps)
		if err != nil {
			tb.Fatal(err)
		}
		last, err := w.waitAll(r.Version, len(clusters), 10*time.Second)
		if err != nil {
			tb.Fatal(err)
		}
		lat = append(lat, last.Sub(start))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range clusters {
		if !slices.IsSorted(w.seen[c]) || len(w.seen[c]) != n {
			tb.Fatalf("%s saw %d versions (want %d), in order: %v", c, len(w.seen[c]), n, slices.IsSorted(w.seen[c]))
		}
	}
	return lat
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func natsServer(tb testing.TB, syncAlways bool) string {
	tb.Helper()
	cfg := embedded.DefaultConfig()
	cfg.KafkaListen, cfg.NATSListen, cfg.DataDir, cfg.SyncAlways = "", "127.0.0.1:0", tb.TempDir(), syncAlways
	b, err := embedded.Start(testCtx(tb, 30*time.Second), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b.NATSURL()
}

// TestPublishToSwap publishes 200 versions of the example fleet's three
// snapshots (with tables) to a file-backed bucket, three data-plane
// watchers on their own connections swap each in, and every watcher sees
// every version in order. The latencies are logged; the benchmark below
// reports them.
func TestPublishToSwap(t *testing.T) {
	n := 200
	if raceEnabled {
		n = 40 // the race detector slows decoding tenfold; the benchmark measures
	}
	lat := measureSwaps(t, natsServer(t, false), n)
	t.Logf("publish-to-swap over %d versions, 3 watchers: p50 %v p99 %v max %v",
		len(lat), quantile(lat, 0.5), quantile(lat, 0.99), slices.Max(lat))
}

// BenchmarkPublishToSwap reports the time from the start of a publish
// (manifest claim plus three cluster keys) to the moment the last of three
// data-plane watchers has decoded its snapshot and table, with the NATS
// store syncing on its default interval and with every write fsynced
// (sync_interval: always, the production setting). Run with
// -benchtime=200x: each iteration is one publish.
func BenchmarkPublishToSwap(b *testing.B) {
	for _, mode := range []struct {
		name       string
		syncAlways bool
	}{{"sync=interval", false}, {"sync=always", true}} {
		b.Run(mode.name, func(b *testing.B) {
			lat := measureSwaps(b, natsServer(b, mode.syncAlways), b.N)
			b.StopTimer()
			b.ReportMetric(float64(quantile(lat, 0.5).Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(quantile(lat, 0.99).Microseconds())/1000, "p99_ms")
		})
	}
}
