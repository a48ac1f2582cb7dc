package window

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

func completion(engine, cluster string, tSec float64, ttft, tbot float64, out, prompt, cached uint32, failure string) schemas.Event {
	return schemas.Event{Kind: schemas.KindCompletion, Completion: schemas.Completion{
		Engine: engine, Cluster: cluster, TimeUnixNano: int64(tSec * float64(sec)),
		TTFTMs: ttft, TBOTMs: tbot, OutputTokens: out, PromptTokens: prompt, CachedPromptTokens: cached, Error: failure,
	}}
}

func status(engine string, tSec float64, running, waiting, ready uint32, kv float64, h schemas.Health) schemas.Event {
	return schemas.Event{Kind: schemas.KindStatus, Status: schemas.EngineStatus{
		Engine: engine, TimeUnixNano: int64(tSec * float64(sec)), Running: running, Waiting: waiting,
		ReadyReplicas: ready, TotalReplicas: 2, KVCacheUtilization: kv, Health: h,
	}}
}

func featureConfig() FeaturesConfig {
	c := DefaultFeaturesConfig()
	c.Window = cfgTumbling(10, 0, 0)
	c.MaxBatchPerReplica = map[string]int{"e1": 8}
	return c
}

func TestFeaturesKnownAnswer(t *testing.T) {
	f, err := NewFeatures(featureConfig())
	if err != nil {
		t.Fatal(err)
	}
	evs := []schemas.Event{
		completion("e1", "fe-a", 1, 100, 20, 10, 1000, 400, ""),
		completion("e1", "fe-b", 2, 200, 30, 10, 500, 0, ""),
		completion("e1", "fe-a", 3, 9999, 9999, 10, 100, 0, "boom"), // errors: no latency
		completion("e1", "fe-a", 4, 300, 40, 1, 400, 400, ""),       // one token: no TBOT
		completion("e2", "", 5, 50, 10, 5, 10, 0, ""),
		status("e1", 2, 4, 2, 1, 0.5, schemas.HealthHealthy),
		status("e1", 8, 8, 0, 2, 0.7, schemas.HealthDegraded),
		status("e1", 6, 1, 1, 1, 0.3, schemas.HealthHealthy), // older than t=8: not "last"
		status("e2", 5, 1, 0, 1, 0.1, schemas.HealthHealthy),
		completion("e1", "fe-a", 12, 100, 20, 10, 10, 0, ""), // closes [0,10)
		completion("e1", "fe-b", 4, 100, 20, 10, 10, 0, ""),  // late
	}
	var rows []schemas.Feature
	for i := range evs {
		f.Add(Untracked, &evs[i])
		rows = f.Drain(rows)
	}
	rows = f.Flush(rows)
	w0 := schemas.Feature{WindowStartUnixNano: 0, WindowEndUnixNano: 10 * sec}
	w1 := schemas.Feature{WindowStartUnixNano: 10 * sec, WindowEndUnixNano: 20 * sec}
	want := []schemas.Feature{
		with(w0, func(r *schemas.Feature) {
			r.Engine, r.Requests, r.Errors, r.ArrivalRPS = "e1", 4, 1, 0.4
			r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms = 200, 200, 200 // ranks floor(q*2) of {100,200,300}
			r.TBOTP50Ms, r.TBOTP90Ms, r.TBOTP99Ms = 20, 20, 20
			r.ErrorRate, r.CacheHitRatio = 0.25, 800.0/2000
			r.InFlight, r.Utilization, r.KVCacheUtil = 16.0/3, (0.5+0.5+1.0/8)/3, 1.5/3
			r.ReadyReplicas, r.Healthy, r.StatusEvents = 2, false, 3
			// the request shape of the three without error: prompts 1000
			// (400 cached), 500 and 400 (all cached), outputs 10, 10, 1
			r.PromptTokensMean, r.OutputTokensMean, r.UncachedSqMean = 1900.0/3, 7, (600.0*600+500*500)/3
		}),
		with(w0, func(r *schemas.Feature) {
			r.Engine, r.Cluster, r.Requests, r.Errors, r.ArrivalRPS = "e1", "fe-a", 3, 1, 0.3
			r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms = 100, 100, 100
			r.TBOTP50Ms, r.TBOTP90Ms, r.TBOTP99Ms = 20, 20, 20
			r.ErrorRate, r.CacheHitRatio = 1.0/3, 800.0/1500
			r.PromptTokensMean, r.OutputTokensMean, r.UncachedSqMean = 700, 5.5, 600.0*600/2
		}),
		with(w0, func(r *schemas.Feature) {
			r.Engine, r.Cluster, r.Requests, r.ArrivalRPS = "e1", "fe-b", 1, 0.1
			r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms = 200, 200, 200
			r.TBOTP50Ms, r.TBOTP90Ms, r.TBOTP99Ms = 30, 30, 30
			r.PromptTokensMean, r.OutputTokensMean, r.UncachedSqMean = 500, 10, 500*500
		}),
		with(w0, func(r *schemas.Feature) {
			r.Engine, r.Requests, r.ArrivalRPS = "e2", 1, 0.1
			r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms = 50, 50, 50
			r.TBOTP50Ms, r.TBOTP90Ms, r.TBOTP99Ms = 10, 10, 10
			r.InFlight, r.KVCacheUtil, r.ReadyReplicas, r.Healthy, r.StatusEvents = 1, 0.1, 1, true, 1
			r.PromptTokensMean, r.OutputTokensMean, r.UncachedSqMean = 10, 5, 100
		}),
		with(w1, func(r *schemas.Feature) {
			r.Engine, r.Requests, r.ArrivalRPS, r.LateEvents = "e1", 1, 0.1, 1
			r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms = 100, 100, 100
			r.TBOTP50Ms, r.TBOTP90Ms, r.TBOTP99Ms = 20, 20, 20
			r.PromptTokensMean, r.OutputTokensMean, r.UncachedSqMean = 10, 10, 100
		}),
		with(w1, func(r *schemas.Feature) {
			r.Engine, r.Cluster, r.Requests, r.ArrivalRPS = "e1", "fe-a", 1, 0.1
			r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms = 100, 100, 100
			r.TBOTP50Ms, r.TBOTP90Ms, r.TBOTP99Ms = 20, 20, 20
			r.PromptTokensMean, r.OutputTokensMean, r.UncachedSqMean = 10, 10, 100
		}),
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i := range want {
		if d := featureDiff(rows[i], want[i]); d != "" {
			t.Errorf("row %d (%s/%s): %s", i, want[i].Engine, want[i].Cluster, d)
		}
	}
}

func with(r schemas.Feature, set func(*schemas.Feature)) schemas.Feature {
	set(&r)
	return r
}

// featureDiff compares rows: latencies within the sketch's accuracy, other
// floats to 1e-12, the rest exactly.
func featureDiff(got, want schemas.Feature) string {
	lat := func(g, w float64) bool { return math.Abs(g-w) <= SketchRelativeAccuracy*w }
	eq := func(g, w float64) bool { return math.Abs(g-w) <= 1e-12 }
	fg := []float64{got.TTFTP50Ms, got.TTFTP90Ms, got.TTFTP99Ms, got.TBOTP50Ms, got.TBOTP90Ms, got.TBOTP99Ms}
	fw := []float64{want.TTFTP50Ms, want.TTFTP90Ms, want.TTFTP99Ms, want.TBOTP50Ms, want.TBOTP90Ms, want.TBOTP99Ms}
	for i := range fg {
		if !lat(fg[i], fw[i]) {
			return fmt.Sprintf("latency %d: got %v, want %v", i, fg[i], fw[i])
		}
	}
	og := []float64{got.ArrivalRPS, got.InFlight, got.ErrorRate, got.CacheHitRatio, got.Utilization, got.KVCacheUtil}
	ow := []float64{want.ArrivalRPS, want.InFlight, want.ErrorRate, want.CacheHitRatio, want.Utilization, want.KVCacheUtil}
	for i := range og {
		if !eq(og[i], ow[i]) {
			return fmt.Sprintf("rate %d: got %v, want %v", i, og[i], ow[i])
		}
	}
	got.TTFTP50Ms, got.TTFTP90Ms, got.TTFTP99Ms, got.TBOTP50Ms, got.TBOTP90Ms, got.TBOTP99Ms = 0, 0, 0, 0, 0, 0
	want.TTFTP50Ms, want.TTFTP90Ms, want.TTFTP99Ms, want.TBOTP50Ms, want.TBOTP90Ms, want.TBOTP99Ms = 0, 0, 0, 0, 0, 0
	got.ArrivalRPS, got.InFlight, got.ErrorRate, got.CacheHitRatio, got.Utilization, got.KVCacheUtil = 0, 0, 0, 0, 0, 0
	want.ArrivalRPS, want.InFlight, want.ErrorRate, want.CacheHitRatio, want.Utilization, want.KVCacheUtil = 0, 0, 0, 0, 0, 0
	if got != want {
		return fmt.Sprintf("got %+v\nwant %+v", got, want)
	}
	return ""
}

func TestFeaturesRowsSortedAndHopping(t *testing.T) {
	c := featureConfig()
	c.Window.Size, c.Window.Hop = 20*time.Second, 10*time.Second
	f, err := NewFeatures(c)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	engines := []string{"z", "m", "a"}
	clusters := []string{"fe-2", "", "fe-1"}
	var rows []schemas.Feature
	n := 0
	for i := range 2000 {
		ev := completion(engines[r.IntN(3)], clusters[r.IntN(3)], float64(i)*0.05, 100, 10, 5, 10, 0, "")
		if f.Add(Untracked, &ev) == Applied {
			n++
		}
		rows = f.Drain(rows)
	}
	rows = f.Flush(rows)
	total := uint64(0)
	for i, row := range rows {
		if row.Cluster == "" {
			total += row.Requests
		}
		if i == 0 {
			continue
		}
		p := rows[i-1]
		if cmpFeature(p, row) >= 0 {
			t.Fatalf("row %d (%d %s %s) not after (%d %s %s)", i, row.WindowEndUnixNano, row.Engine, row.Cluster,
				p.WindowEndUnixNano, p.Engine, p.Cluster)
		}
	}
	if total != uint64(2*n) {
		t.Errorf("engine rows count %d requests; each of %d events is in 2 hopping windows", total, n)
	}
}

func cmpFeature(a, b schemas.Feature) int {
	switch {
	case a.WindowEndUnixNano != b.WindowEndUnixNano:
		return int(a.WindowEndUnixNano - b.WindowEndUnixNano)
	case a.Engine != b.Engine:
		if a.Engine < b.Engine {
			return -1
		}
		return 1
	case a.Cluster < b.Cluster:
		return -1
	case a.Cluster > b.Cluster:
		return 1
	}
	return 0
}

func TestFeaturesClusterOverflowAndUnknownKind(t *testing.T) {
	c := featureConfig()
	c.MaxClustersPerEngine = 1
	f, err := NewFeatures(c)
	if err != nil {
		t.Fatal(err)
	}
	a := completion("e1", "fe-a", 1, 100, 10, 5, 10, 0, "")
	b := completion("e1", "fe-b", 2, 100, 10, 5, 10, 0, "")
	f.Add(Untracked, &a)
	f.Add(Untracked, &b)
	var bad schemas.Event
	if got := f.Add(Untracked, &bad); got != Invalid {
		t.Errorf("zero event: %v, want invalid", got)
	}
	rows := f.Flush(nil)
	if len(rows) != 2 || rows[0].Requests != 2 || rows[1].Cluster != "fe-a" {
		t.Errorf("rows %+v: want the engine row with both and one pair row", rows)
	}
	if s := f.Stats(); s.ClusterOverflow != 1 || s.UnknownKind != 1 || s.Events != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestFeaturesConfigValidate(t *testing.T) {
	for name, mutate := range map[string]func(*FeaturesConfig){
		"window":    func(c *FeaturesConfig) { c.Window.Size = 0 },
		"clusters":  func(c *FeaturesConfig) { c.MaxClustersPerEngine = 0 },
		"max batch": func(c *FeaturesConfig) { c.MaxBatchPerReplica = map[string]int{"e": 0} },
	} {
		c := DefaultFeaturesConfig()
		mutate(&c)
		if _, err := NewFeatures(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewFeatures = %v, want ErrConfig", name, err)
		}
	}
}

// TestFeaturesRestart runs the restart check through Features, with
// commits and checkpoints as the aggregator will use them.
func TestFeaturesRestart(t *testing.T) {
	evs := genStream(21, 400, 3, 400)
	toEvent := func(e event) schemas.Event {
		return completion(e.key, fmt.Sprintf("fe-%d", e.id%3), e.t, float64(50+e.id%200), 10, 5, 100, uint32(e.id%100), "")
	}
	feed := func(cp *Checkpoint, deliveries []event, crashAt int) ([]schemas.Feature, Checkpoint) {
		f, err := NewFeatures(featureConfig())
		if err != nil {
			t.Fatal(err)
		}
		if cp != nil {
			if err := f.Restore(*cp); err != nil {
				t.Fatal(err)
			}
		}
		var rows []schemas.Feature
		for i, e := range deliveries {
			if i == crashAt {
				return rows, f.Checkpoint()
			}
			ev := toEvent(e)
			f.Add(e.pos, &ev)
			rows = f.Drain(rows)
		}
		return f.Flush(rows), Checkpoint{}
	}
	ref, _ := feed(nil, evs, -1)
	for crash := 50; crash < len(evs); crash += 50 {
		before, cp := feed(nil, evs, crash)
		after, _ := feed(&cp, redeliver(evs, cp, inOrder, nil), -1)
		if got := slices.Concat(before, after); !slices.Equal(got, ref) {
			t.Fatalf("crash at %d: %d rows, want %d identical to the no-crash run", crash, len(got), len(ref))
		}
	}
}

func TestFeaturesAddDoesNotAllocate(t *testing.T) {
	f, err := NewFeatures(featureConfig())
	if err != nil {
		t.Fatal(err)
	}
	evs := benchEvents(4096, 20, 4)
	var rows []schemas.Feature
	i := 0
	step := func() {
		for range 512 {
			ev := evs[i%len(evs)]
			setTime(&ev, int64(i)*int64(time.Millisecond))
			f.Add(Position{Partition: 0, Offset: int64(i)}, &ev)
			i++
		}
		rows = f.Drain(rows[:0])
	}
	for range 200 { // warm up: windows, keys, sketches reach their sizes
		step()
	}
	if a := testing.AllocsPerRun(50, step); a > 0 {
		t.Errorf("%.2f allocations per 512 events in steady state", a)
	}
}
