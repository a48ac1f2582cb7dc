package backtest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/backtest"
)

// requestsRun runs a short stretch of the bundled trace with policies
// that serve, shed (the optimizer on a fleet whose shedding is cheap) and
// fail (an engine failure) requests, and writes their records to path.
func requestsRun(t *testing.T, path string) *backtest.Result {
	t.Helper()
	fleet, err := schemas.LoadFleet("testdata/fleet-3region.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fleet.ShedPenaltyMs = 20000 // shed more readily, so that shed rows are tested
	tr, err := backtest.ReadTraceFile("testdata/mooncake_conversation_20m.jsonl", backtest.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := backtest.DefaultConfig()
	cfg.Fleet, cfg.Duration = fleet, 4*time.Minute
	cfg.Policies = []string{backtest.PolicyLeastLoaded, "power-of-two:local", backtest.PolicyOptimizer}
	cfg.Failures = []backtest.Failure{{Engine: "west-1", At: time.Minute, For: time.Minute}}
	b, err := backtest.New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := backtest.CreateRequests(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(context.Background())
	if err != nil {
		rf.Abort()
		t.Fatal(err)
	}
	if err := rf.Write(b, res); err != nil {
		t.Fatal(err)
	}
	return res
}

// recomputed is what a reader of the records computes for one policy,
// by the rules of README.md, independently of the simulator's code.
type recomputed struct {
	requests, served, good, shed, failed   int
	ttft, e2e, tbot                        backtest.Stats
	cacheHit, attainment, goodput          float64
	servedFrac, shedFrac, failedFrac       float64
	firstArrival, lastArrival, sumInput    float64
	ttfts, e2es, tbots                     []float64
	cachedTokens, promptTokens             int64
	outcomeSet                             map[string]bool
	servedWithoutEngine, shedWithLatencies int
}

func recompute(t *testing.T, rows [][]string, slo backtest.SLO) map[string]*recomputed {
	t.Helper()
	if !slices.Equal(rows[0], backtest.RequestsHeader) {
		t.Fatalf("header %v, want %v", rows[0], backtest.RequestsHeader)
	}
	out := map[string]*recomputed{}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("bad number %q: %v", s, err)
		}
		return v
	}
	for _, r := range rows[1:] {
		p := out[r[0]]
		if p == nil {
			p = &recomputed{firstArrival: math.Inf(1), lastArrival: math.Inf(-1), outcomeSet: map[string]bool{}}
			out[r[0]] = p
		}
		p.requests++
		at := num(r[2])
		p.firstArrival, p.lastArrival = min(p.firstArrival, at), max(p.lastArrival, at)
		p.outcomeSet[r[6]] = true
		switch r[6] {
		case backtest.OutcomeShed:
			p.shed++
			if r[5] != "" || r[7] != "" || r[11] != "" {
				p.shedWithLatencies++
			}
		case backtest.OutcomeFailed:
			p.failed++
		case backtest.OutcomeServed:
			p.served++
			if r[5] == "" {
				p.servedWithoutEngine++
			}
			ttft, e2e, tbot := num(r[7]), num(r[8]), num(r[9])
			p.ttfts, p.e2es, p.tbots = append(p.ttfts, ttft), append(p.e2es, e2e), append(p.tbots, tbot)
			if ttft <= slo.TTFTMs && tbot <= slo.TBOTMs {
				p.good++
			}
			p.promptTokens += int64(num(r[10]))
			p.cachedTokens += int64(num(r[11]))
		default:
			t.Fatalf("outcome %q", r[6])
		}
	}
	for _, p := range out {
		p.ttft, p.e2e, p.tbot = stats(p.ttfts), stats(p.e2es), stats(p.tbots)
		n := float64(p.requests)
		p.attainment, p.servedFrac = float64(p.good)/n, float64(p.served)/n
		p.shedFrac, p.failedFrac = float64(p.shed)/n, float64(p.failed)/n
		if p.promptTokens > 0 {
			p.cacheHit = float64(p.cachedTokens) / float64(p.promptTokens)
		}
		p.goodput = float64(p.good) / ((p.lastArrival - p.firstArrival) / 1000)
	}
	return out
}

// stats: nearest-rank quantiles, the mean summed in ascending order.
func stats(xs []float64) backtest.Stats {
	if len(xs) == 0 {
		return backtest.Stats{}
	}
	slices.Sort(xs)
	q := func(f float64) float64 { return xs[max(int(math.Ceil(f*float64(len(xs))))-1, 0)] }
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return backtest.Stats{Mean: sum / float64(len(xs)), P50: q(0.5), P90: q(0.9), P99: q(0.99)}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if filepath.Ext(path) == ".gz" {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestRequestsRecomputeAggregates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.csv.gz")
	res := requestsRun(t, path)
	rows := readCSV(t, path)
	got := recompute(t, rows, res.Policies[0].SLO)
	sawShed, sawFailed := false, false
	for _, p := range res.Policies {
		r := got[p.Policy]
		if r == nil {
			t.Fatalf("no rows for %s", p.Policy)
		}
		if r.servedWithoutEngine+r.shedWithLatencies > 0 {
			t.Errorf("%s: %d served rows without engine, %d shed rows with engine or latencies", p.Policy, r.servedWithoutEngine, r.shedWithLatencies)
		}
		sawShed, sawFailed = sawShed || r.shed > 0, sawFailed || r.failed > 0
		want := []struct {
			name      string
			got, want any
		}{
			{"requests", r.requests, p.Requests}, {"served", r.served, p.Served}, {"good", r.good, p.Good},
			{"shed", r.shed, p.Shed}, {"failed", r.failed, p.Failed},
			{"ttft_ms", r.ttft, p.TTFTMs}, {"e2e_ms", r.e2e, p.E2EMs}, {"tbot_ms", r.tbot, p.TBOTMs},
			{"cache_hit_ratio", r.cacheHit, p.CacheHitRatio}, {"slo_attainment", r.attainment, p.SLOAttainment},
			{"goodput_rps", r.goodput, p.GoodputRPS}, {"served_fraction", r.servedFrac, p.ServedFraction},
			{"shed_fraction", r.shedFrac, p.ShedFraction}, {"failed_fraction", r.failedFrac, p.FailedFraction},
		}
		for _, w := range want {
			if w.got != w.want { // exact: the records carry every bit
				t.Errorf("%s %s: recomputed %v, --json %v", p.Policy, w.name, w.got, w.want)
			}
		}
	}
	if !sawShed || !sawFailed {
		t.Errorf("the run must exercise shed (%v) and failed (%v) rows", sawShed, sawFailed)
	}
}

// TestRequestsFormats checks that the three encodings carry the same rows
// and that a second run with the same seed writes identical files.
func TestRequestsFormats(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulation four times")
	}
	dir := t.TempDir()
	csvPath, gzPath, pqPath := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.csv.gz"), filepath.Join(dir, "r.parquet")
	requestsRun(t, csvPath)
	requestsRun(t, gzPath)
	requestsRun(t, pqPath)
	plain, zipped := readCSV(t, csvPath), readCSV(t, gzPath)
	if !slices.EqualFunc(plain, zipped, slices.Equal) {
		t.Fatal("csv and csv.gz rows differ")
	}
	pq := readParquet(t, pqPath)
	if !slices.EqualFunc(plain[1:], pq, slices.Equal) {
		for i := range min(len(pq), len(plain)-1) {
			if !slices.Equal(plain[i+1], pq[i]) {
				t.Fatalf("row %d: csv %v, parquet %v", i, plain[i+1], pq[i])
			}
		}
		t.Fatalf("csv %d rows, parquet %d", len(plain)-1, len(pq))
	}
	again := filepath.Join(dir, "again.csv")
	requestsRun(t, again)
	a, _ := os.ReadFile(csvPath)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("the same seed wrote different records")
	}
}

// readParquet reads the records back as CSV-shaped rows (nulls empty).
func readParquet(t *testing.T, path string) [][]string {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	for i, f := range backtest.RequestsSchema.Fields() {
		g := tbl.Schema().Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) || g.Nullable != f.Nullable {
			t.Fatalf("column %d: %v, want %v", i, g, f)
		}
	}
	tr := array.NewTableReader(tbl, 1<<20)
	defer tr.Release()
	var rows [][]string
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := range int(rec.NumRows()) {
			row := make([]string, rec.NumCols())
			for c := range row {
				col := rec.Column(c)
				if col.IsNull(i) {
					continue
				}
				switch a := col.(type) {
				case *array.String:
					row[c] = a.Value(i)
				case *array.Int64:
					row[c] = strconv.FormatInt(a.Value(i), 10)
				case *array.Float64:
					row[c] = strconv.FormatFloat(a.Value(i), 'f', -1, 64)
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}
