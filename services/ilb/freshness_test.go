package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/dataplane"
	"github.com/ilb-router/ilb/services/optimizer"
	"github.com/ilb-router/ilb/solver/sched"
	"github.com/ilb-router/ilb/streams/kv"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestPublishToSwapRealDataPlanes measures freshness end to end with the
// real services: the optimizer's Publisher writes 100 versions of the
// example fleet's three snapshots (with tables), three data planes (one
// per cluster, each on its own NATS connection) swap them in, and their
// own histogram ilb_dataplane_publish_to_swap_seconds (created_at, the
// start of the publish, to the swap) says how long it took. Every data
// plane must have swapped every version.
func TestPublishToSwapRealDataPlanes(t *testing.T) {
	url := streamstest.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pub := freshnessPublisher(t, ctx, url)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	f := schemas.ExampleFleet()
	dps := map[string]*dataplane.DataPlane{}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, len(f.Clusters))
	for _, c := range f.Clusters {
		dps[c.Name] = startFreshnessDataPlane(t, url, c.Name, mp, runCtx, done)
	}
	defer func() {
		stop()
		for range f.Clusters {
			if err := <-done; err != nil {
				t.Errorf("data plane: %v", err)
			}
		}
	}()
	const n = 100
	tables := map[string]*sched.Table{}
	for i := range n {
		r, err := pub.Publish(ctx, freshnessSnapshots(t, f, tables, i))
		if err != nil {
			t.Fatal(err)
		}
		for c, d := range dps {
			waitRoutingVersion(t, d, c, r.Version)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok || !strings.Contains(m.Name, "publish_to_swap") {
				continue
			}
			total := uint64(0)
			for _, dp := range h.DataPoints { // one per cluster, or one for all
				cl, _ := dp.Attributes.Value("cluster")
				total += dp.Count
				t.Logf("cluster %q: %d swaps, mean %.2f ms, p50 <= %s, p99 <= %s", cl.AsString(), dp.Count,
					1000*dp.Sum/float64(dp.Count), bucketBound(dp, 0.5), bucketBound(dp, 0.99))
			}
			if want := uint64(n * len(f.Clusters)); total != want {
				t.Errorf("%d swaps recorded, want %d", total, want)
			}
			return
		}
	}
	t.Fatal("no publish_to_swap histogram recorded")
}

func freshnessPublisher(t *testing.T, ctx context.Context, url string) *optimizer.Publisher {
	t.Helper()
	cfg := kv.DefaultConfig()
	cfg.URL = url
	nc, js, err := kv.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := optimizer.EnsureWeightsBucket(ctx, js, schemas.BucketWeights, 1); err != nil {
		t.Fatal(err)
	}
	p, err := optimizer.NewPublisher(ctx, js, optimizer.PublisherConfig{Bucket: schemas.BucketWeights, ID: "freshness"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func startFreshnessDataPlane(t *testing.T, url, cluster string, mp *sdkmetric.MeterProvider, ctx context.Context, done chan<- error) *dataplane.DataPlane {
	t.Helper()
	cfg := kv.DefaultConfig()
	cfg.URL = url
	nc, js, err := kv.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	dc := dataplane.DefaultConfig()
	dc.Clusters = []string{cluster}
	d, err := dataplane.New(dc, dataplane.Deps{JetStream: js, NATS: nc, Meter: mp})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- d.Run(ctx) }()
	return d
}

// freshnessSnapshots is version i of the clusters' weights (each cluster
// over its eligible engines, moving a little every version), with tables
// updated from the previous ones.
func freshnessSnapshots(t *testing.T, f *schemas.Fleet, tables map[string]*sched.Table, i int) []*schemas.Snapshot {
	t.Helper()
	var out []*schemas.Snapshot
	for ci, c := range f.Clusters {
		var names []string
		var ws []float64
		total := 0.0
		for j, e := range f.EligibleEngines(c) {
			names = append(names, e.Name)
			ws = append(ws, 1+0.3*float64((i+j+ci)%5))
			total += ws[len(ws)-1]
		}
		w := map[string]float64{}
		for j := range ws {
			ws[j] /= total
			w[names[j]] = ws[j]
		}
		tab, err := sched.Rebalance(tables[c.Name], names, ws)
		if err != nil {
			t.Fatal(err)
		}
		tables[c.Name] = tab
		slots, engines, enc, data := tab.Encode()
		out = append(out, &schemas.Snapshot{Cluster: c.Name, Weights: w,
			Table: &schemas.SnapshotTable{Slots: slots, Engines: engines, Encoding: enc, Data: data}})
	}
	return out
}

// waitRoutingVersion polls the data plane's GET /v1/routing in process
// until it serves version v. Polling only paces the publishes; the
// latency is the data plane's own measurement.
func waitRoutingVersion(t *testing.T, d *dataplane.DataPlane, cluster string, v uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/routing?cluster="+cluster, nil))
		var body struct {
			Version uint64 `json:"version"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &body) == nil && body.Version >= v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: version %d not served after 10 s: %s", cluster, v, rec.Body.String())
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// bucketBound is the upper bound of the histogram bucket holding
// quantile q.
func bucketBound(dp metricdata.HistogramDataPoint[float64], q float64) string {
	target := q * float64(dp.Count)
	cum := 0.0
	for i, c := range dp.BucketCounts {
		cum += float64(c)
		if cum >= target {
			if i < len(dp.Bounds) {
				return fmt.Sprintf("%g ms", 1000*dp.Bounds[i])
			}
			return "+Inf"
		}
	}
	return "+Inf"
}
