package aggregator

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/telemetry"
	"github.com/ilb-router/ilb/streams/streamstest"
)

// TestMetricsAndFiles checks the metric names deploy/METRICS.md promises
// and the Arrow IPC files written under OutDir.
func TestMetricsAndFiles(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.DefaultConfig("aggregator-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	addrs := streamstest.Kafka(t)
	recs := []*kgo.Record{
		signal(t, 0, completion("e4", "fe-a", at(0.2), 120, 10)),
		signal(t, 0, completion("e4", "fe-a", at(0.4), 80, 10)),
		{Topic: schemas.TopicSignals, Partition: 0, Value: []byte{0xff}},
		signal(t, 0, status("e4", at(0.5), 3)),
		signal(t, 0, status("e4", at(3), 3)),
	}
	producer(t, addrs)(recs...)
	cfg := testConfig(addrs, "g-metrics")
	cfg.OutDir = t.TempDir()
	r := start(t, cfg, Deps{Meter: tel.Meter, Metrics: tel.MetricsHandler()})
	waitFor(t, 20*time.Second, "records handled", func() bool { return caughtUp(r.a, ends(recs)) && r.a.cnt.windows.Load() == 1 })

	srv := httptest.NewServer(r.a.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ilb_aggregator_events_total{type="completion"} 2`,
		`ilb_aggregator_events_total{type="status"} 2`,
		`ilb_aggregator_dlq_total{reason="decode"} 1`,
		`ilb_aggregator_dlq_total{reason="unknown_schema"} 0`,
		`ilb_aggregator_ttft_p99_ms{engine="e4"} ` + strconv.FormatFloat(r.a.Features().Rows[0].TTFTP99Ms, 'g', -1, 64),
		`ilb_aggregator_windows_total 1`,
		`ilb_aggregator_late_events_total 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q in:\n%s", want, grepIlb(string(body)))
		}
	}
	resp, err = srv.Client().Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	r.stop(t) // closes the file
	files, _ := filepath.Glob(filepath.Join(cfg.OutDir, "features-*.arrow"))
	if len(files) != 1 {
		entries, _ := os.ReadDir(cfg.OutDir)
		t.Fatalf("features files %v (dir: %v)", files, entries)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatalf("arrow reader: %v", err)
	}
	defer rd.Close()
	if rd.NumRecords() != 1 {
		t.Fatalf("%d batches", rd.NumRecords())
	}
	rec, _ := rd.RecordBatch(0)
	rows, err := schemas.FeaturesFromRecord(rec)
	if err != nil || len(rows) != 2 || rows[0].Requests != 2 || rows[1].Cluster != "fe-a" {
		t.Errorf("file rows %+v, %v", rows, err)
	}
}

func grepIlb(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "ilb_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
